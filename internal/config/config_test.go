package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/target"
)

func TestNemoRLFile(t *testing.T) {
	c, err := Load("testdata/nemo-rl.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !c.Enabled || c.Interval != 0.5 || !c.LogScalars || c.TimelinePlots {
		t.Errorf("logger keys: %+v", c)
	}
	if c.StepEvery != 0 || c.OutDir != "runs/grpo" {
		t.Errorf("own keys: step_every %v out_dir %q", c.StepEvery, c.OutDir)
	}
	want := []string{"http://10.0.0.1:8000/metrics", "http://10.0.0.2:8000/metrics"}
	if strings.Join(urls(c.Targets), " ") != strings.Join(want, " ") {
		t.Errorf("targets %v, want %v", c.Targets, want)
	}
	if c.Timeout() != 400*time.Millisecond {
		t.Errorf("default timeout %v, want 80%% of 0.5s", c.Timeout())
	}
}

func TestVllmstatFile(t *testing.T) {
	c, err := Load("testdata/vllmstat.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Interval != 2 || c.StepEvery != time.Minute || c.ScrapeTimeout != 300*time.Millisecond || c.MetricPrefix != "rollout" || !c.PerWorker {
		t.Errorf("got %+v", c)
	}
	if c.Targets[1].URL != "http://127.0.0.1:8101/metrics" {
		t.Errorf("host:port target became %q", c.Targets[1])
	}
}

func TestDefaults(t *testing.T) {
	c := Default()
	if c.Interval != 1 || !c.LogScalars || c.TimelinePlots || !c.Enabled || c.MetricPrefix != "vllm" {
		t.Errorf("defaults %+v", c)
	}
	c.Interval = 60
	if c.Timeout() != 10*time.Second {
		t.Errorf("timeout not capped at 10s: %v", c.Timeout())
	}
}

func TestBadFileReportsEverything(t *testing.T) {
	c, err := Load("testdata/bad.bad.yaml")
	if err == nil {
		err = c.Validate()
	}
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{
		`step_evry (line 4): unknown key`,
		`scrape_timeout (line 5): "soon" is not allowed`,
		`per_worker (line 6): "yes" is not allowed: must be true or false`,
		`vllm_cfg.vllm_metrics_logger_interval (line 8): "-1" is not allowed: must be a number of seconds > 0`,
		`vllm_cfg.vllm_metrics_log_scalars (line 9): "maybe" is not allowed`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// Validate also reports the targets, with their key path and index.
	c2 := Default()
	c2.Targets = TargetsOf([]string{"ftp://10.0.0.1/metrics", "not a target", "h:1", "h:1"})
	err = c2.Validate()
	for _, want := range []string{`targets[0]: "ftp://10.0.0.1/metrics" is not allowed: scheme "ftp"`, `targets[1]: "not a target" is not allowed`, `targets[3]: "h:1" is listed twice`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestDisabledNeedsNoTargets(t *testing.T) {
	c, err := Parse([]byte("vllm_cfg:\n  enable_vllm_metrics_logger: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Enabled {
		t.Fatal("enable_vllm_metrics_logger: false ignored")
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("a disabled logger needs no targets: %v", err)
	}
}

func TestNotYAML(t *testing.T) {
	for _, in := range []string{"targets: [unclosed", "- a\n- b\n"} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	if _, err := Load("testdata/missing.yaml"); err == nil || !os.IsNotExist(unwrap(err)) {
		t.Errorf("missing file: %v", err)
	}
}

func urls(ts []target.Target) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.URL)
	}
	return out
}

func unwrap(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestListenNeedsTokenOffLoopback(t *testing.T) {
	tests := []struct {
		listen, token string
		insecure      bool
		ok            bool
	}{
		{"127.0.0.1:9400", "", false, true},
		{"localhost:9400", "", false, true},
		{"[::1]:9400", "", false, true},
		{"0.0.0.0:9400", "", false, false},
		{"10.1.2.3:9400", "", false, false},
		{"0.0.0.0:9400", "s3cret", false, true},
		{"0.0.0.0:9400", "", true, true},
		{"nonsense", "", false, false},
		{"", "", false, true}, // no API
	}
	for _, tt := range tests {
		c := Default()
		c.Targets = TargetsOf([]string{"h:1"})
		c.Listen, c.APIToken, c.AllowInsecureListen = tt.listen, target.NewSecret(tt.token), tt.insecure
		err := c.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("listen %q token %q insecure %v: %v", tt.listen, tt.token, tt.insecure, err)
		}
		if err != nil && tt.listen != "nonsense" && !strings.Contains(err.Error(), "loopback") {
			t.Errorf("error %q does not say why", err)
		}
	}
}

// FuzzParse feeds arbitrary YAML to the config reader: it never panics, and whatever it accepts
// either validates or reports its problems.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/nemo-rl.good.yaml", "testdata/vllmstat.good.yaml", "testdata/bad.bad.yaml", "testdata/auth.good.yaml", "testdata/auth.bad.yaml", "testdata/typos.bad.yaml"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			if _, ok := err.(Problems); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		_ = c.Validate()
	})
}

func TestNemoRLFileWithTopLevelVllmstatKeys(t *testing.T) {
	c, err := Parse([]byte("policy:\n  generation:\n    vllm_cfg:\n      vllm_metrics_logger_interval: 0.25\ntargets: [h:1]\nstep_every: 0\ncheckpointing: {enabled: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Targets) != 1 || c.StepEvery != 0 || c.Interval != 0.25 {
		t.Fatalf("got targets %v step_every %v interval %v", c.Targets, c.StepEvery, c.Interval)
	}
}

func TestCompressionAndRequestNames(t *testing.T) {
	c := Default()
	if c.Compression != scrape.DefaultCompression || !c.RequestNames {
		t.Errorf("defaults: compression %q, request_names %v", c.Compression, c.RequestNames)
	}
	c, err := Parse([]byte("targets: [h:1]\ncompression: none\nrequest_names: false\n"))
	if err == nil {
		err = c.Validate()
	}
	if err != nil || c.Compression != scrape.CompressionNone || c.RequestNames {
		t.Errorf("compression %q, request_names %v, err %v", c.Compression, c.RequestNames, err)
	}
	c, err = Parse([]byte("targets: [h:1]\ncompression: br\nrequest_names: sure\n"))
	if err == nil {
		err = c.Validate()
	}
	for _, want := range []string{
		`request_names (line 3): "sure" is not allowed: must be true or false`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	c, err = Parse([]byte("targets: [h:1]\ncompression: br\n"))
	if err == nil {
		err = c.Validate()
	}
	if want := `compression: "br" is not allowed: must be gzip or none (line 2)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v lacks %q", err, want)
	}
}
