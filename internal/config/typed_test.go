package config

import (
	"strings"
	"testing"
)

func TestTyposAndDuplicates(t *testing.T) {
	_, err := Load("testdata/typos.bad.yaml")
	if err == nil {
		t.Fatal("accepted")
	}
	ps := err.(Problems)
	want := []string{
		"scrape_timout (line 4): unknown key; vllmstat's keys are ",
		"out_dir (line 6): is given twice, at lines 5 and 6",
		"vllm_cfg.vllm_metrics_logger_interval (line 9): is given twice, also as vllm_metrics_logger_interval (line 7)",
		"vllm_cfg.vllm_metrics_log_scalar (line 10): unknown key; did you mean vllm_metrics_log_scalars?",
	}
	if len(ps) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(ps), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(ps[i], w) {
			t.Errorf("problem %d = %q, want prefix %q", i, ps[i], w)
		}
	}
	if !strings.HasSuffix(ps[0], "; did you mean scrape_timeout?") {
		t.Errorf("no did-you-mean: %q", ps[0])
	}
	if strings.Contains(err.Error(), "tensor_parallel_size") {
		t.Errorf("NeMo-RL's own vllm_cfg key reported:\n%v", err)
	}
}

// TestLoggerKeysAtTopLevel: in a vllmstat file the logger keys are vllmstat's own, beside the
// others; the README's key table lists them so.
func TestLoggerKeysAtTopLevel(t *testing.T) {
	c, err := Parse([]byte("targets: [h:1]\nvllm_metrics_logger_interval: 0.25\nvllm_metrics_log_scalars: false\nvllm_metrics_log_timeline_plots: true\nenable_vllm_metrics_logger: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Interval != 0.25 || c.LogScalars || !c.TimelinePlots || !c.Enabled {
		t.Errorf("logger keys at the top: %+v", c)
	}
	if c.Path(KeyInterval) != KeyInterval {
		t.Errorf("interval path %q", c.Path(KeyInterval))
	}
	_, err = Parse([]byte("vllm_metrics_logger_interval: 0\n"))
	if err == nil || !strings.Contains(err.Error(), `vllm_metrics_logger_interval (line 1): "0" is not allowed: must be a number of seconds > 0`) {
		t.Errorf("a bad interval at the top: %v", err)
	}
}

// TestNemoRLLayouts: the logger keys where NeMo-RL keeps them, vllmstat's keys under vllmstat:
// or at the top of a NeMo-RL file, and NeMo-RL's other keys left alone.
func TestNemoRLLayouts(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		interval  float64
		outDir    string
		err       string
	}{
		{"policy.generation.vllm_cfg", "policy:\n  generation:\n    vllm_cfg:\n      vllm_metrics_logger_interval: 0.5\n      gpu_memory_utilization: 0.6\nvllmstat:\n  targets: [h:1]\n  out_dir: o\n", 0.5, "o", ""},
		{"vllm_cfg at the top wins over policy's", "vllm_cfg: {vllm_metrics_logger_interval: 2}\npolicy:\n  generation:\n    vllm_cfg: {vllm_metrics_logger_interval: 3}\ntargets: [h:1]\n", 2, "vllmstat-out", ""},
		{"vllm_cfg inside vllmstat", "vllmstat:\n  targets: [h:1]\n  vllm_cfg: {vllm_metrics_logger_interval: 4}\ngrpo: {max_num_steps: 10}\n", 4, "vllmstat-out", ""},
		{"top-level vllmstat keys in a NeMo-RL file", "policy: {model_name: q}\ncluster: {gpus_per_node: 8}\ntargets: [h:1]\nout_dir: here\n", 1, "here", ""},
		{"a typo at the top of a NeMo-RL file", "policy: {model_name: q}\ntargets: [h:1]\nstep_evry: 1s\n", 0, "", "step_evry (line 3): unknown key; did you mean step_every? (the file's other top-level keys are NeMo-RL's, not read)"},
		{"a key twice at the top of a NeMo-RL file", "policy: {model_name: q}\nout_dir: a\nout_dir: b\n", 0, "", "out_dir (line 3): is given twice, at lines 2 and 3"},
		{"a typo under vllmstat", "vllmstat:\n  targets: [h:1]\n  out_dri: x\n", 0, "", "vllmstat.out_dri (line 3): unknown key; vllmstat's keys are"},
		{"vllmstat given twice", "vllmstat: {targets: [h:1]}\nvllmstat: {out_dir: x}\n", 0, "", "vllmstat (line 2): is given twice, at lines 1 and 2"},
		{"vllm_cfg twice under policy.generation", "policy:\n  generation:\n    vllm_cfg: {}\n    vllm_cfg: {}\n", 0, "", "policy.generation.vllm_cfg (line 4): is given twice, at lines 3 and 4"},
		{"a logger key typo under policy", "policy:\n  generation:\n    vllm_cfg:\n      vllm_metric_logger_interval: 2\n", 0, "", "policy.generation.vllm_cfg.vllm_metric_logger_interval (line 4): unknown key; did you mean vllm_metrics_logger_interval?"},
		{"a bad logger value under policy", "policy:\n  generation:\n    vllm_cfg:\n      enable_vllm_metrics_logger: 1\n", 0, "", `policy.generation.vllm_cfg.enable_vllm_metrics_logger (line 4): "1" is not allowed: must be true or false`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.doc))
			if tt.err != "" {
				if err == nil || strings.Count(err.Error(), tt.err) != 1 {
					t.Fatalf("error %v, want %q once", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Interval != tt.interval || c.OutDir != tt.outDir || len(c.Targets) != 1 {
				t.Errorf("interval %v out_dir %q targets %v", c.Interval, c.OutDir, c.Targets)
			}
		})
	}
}

// TestAllProblemsAtOnce: the parse's problems in file order, then Validate's, each with its
// key path and line; nothing stops at the first.
func TestAllProblemsAtOnce(t *testing.T) {
	doc := "targets: [ftp://h/metrics, {url: h:2, basic_auth: {usernme: u}}]\nstep_every: 1ms\nlisten: 0.0.0.0:9400\nmax_body_bytes: 0\nsinks: [{project: x}]\nworker_labels: [engine]\n"
	c, err := Parse([]byte(doc))
	if err == nil {
		t.Fatal("accepted")
	}
	all := err.Error()
	if err := c.Validate(); err != nil {
		all += "\n" + err.Error()
	}
	for _, want := range []string{
		"targets[1].basic_auth.usernme (line 1): unknown key; the keys here are username, password, password_file; did you mean username?",
		"sinks[0] (line 5): a sink with settings needs a type key",
		"step_every: 1ms is not allowed: must be at least the scrape interval (1s) (line 2)",
		"max_body_bytes: 0 is not allowed: must be a number of bytes > 0 (line 4)",
		`worker_labels: "engine" cannot be a worker label`,
		`listen: "0.0.0.0:9400" is not allowed: without api_token`,
		`targets[0]: "ftp://h/metrics" is not allowed: scheme "ftp"`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
}

// TestSecretsNeverShown: a token or password of a wrong kind is named, not shown.
func TestSecretsNeverShown(t *testing.T) {
	_, err := Parse([]byte("api_token: [tok-x7]\nbasic_auth: {username: u, password: {p: pw-x7}}\ntargets: [h:1]\n"))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"api_token (line 1): must be a non-empty string (its value is not shown)", "basic_auth.password (line 2): must be a non-empty string (its value is not shown)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "x7") {
		t.Errorf("a secret is shown:\n%v", err)
	}
}

func TestSinkSpecs(t *testing.T) {
	c, err := Parse([]byte("vllmstat:\n  targets: [h:1]\n  sinks:\n    - jsonl\n    - {type: wandb, project: rl}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sinks) != 2 || c.Sinks[0].Type != "jsonl" || c.Sinks[0].Settings != nil || c.Sinks[1].Type != "wandb" || c.Sinks[1].Path != "vllmstat.sinks[1]" {
		t.Fatalf("sinks %+v", c.Sinks)
	}
	var s struct {
		Project string `yaml:"project"`
	}
	if _, es := c.Sinks[1].Decode(&s); len(es) > 0 || s.Project != "rl" {
		t.Errorf("decode %+v %v", s, es)
	}
}
