package sink

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit/sinkspec"
)

func TestJSONLSettings(t *testing.T) {
	out := t.TempDir()
	env := Env{OutDir: out}
	for _, tt := range []struct {
		yaml    string
		builtin bool
		err     string
	}{
		{yaml: "jsonl", builtin: true},
		{yaml: "{type: jsonl}", builtin: true},
		{yaml: "{type: jsonl, keys: all}", builtin: true},
		{yaml: "{type: jsonl, path: lean.jsonl, keys: summary}"},
		{yaml: "{type: jsonl, path: lean.jsonl, include: ['vllm/time/*']}"},
		{yaml: "{type: jsonl, keys: summary}", err: `sinks[0].keys (line 1): "summary" is not allowed: steps.jsonl always holds every key`},
		{yaml: "{type: jsonl, exclude: [a]}", err: "sinks[0].exclude (line 1): steps.jsonl always holds every key"},
		{yaml: "{type: jsonl, path: lean.jsonl, keys: sumary}", err: `sinks[0].keys (line 1): "sumary" is not allowed: must be one of summary, standard, all`},
		{yaml: "{type: jsonl, path: lean.jsonl, exclude: ['[']}", err: `sinks[0].exclude[0] (line 1): "[" is not allowed: not a glob`},
		{yaml: "{type: jsonl, pth: lean.jsonl}", err: "sinks[0].pth (line 1): unknown setting of a jsonl sink: the settings are type, path, keys, include, exclude; did you mean path?"},
		{yaml: "{type: jsonl, path: ''}", err: `sinks[0].path (line 1): "" is not allowed: must be a file path`},
		{yaml: "{type: jsonl, path: " + filepath.Join(out, "steps.jsonl") + ", keys: summary}", err: "is the run's own steps file"},
	} {
		p, err := JSONLType.Parse(env, sinkspec.Parse(t, "sinks[0]", tt.yaml))
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: %v, want %q", tt.yaml, err, tt.err)
		}
		if err == nil && p.Builtin() != tt.builtin {
			t.Errorf("%s: builtin %v, want %v", tt.yaml, p.Builtin(), tt.builtin)
		}
	}
}

// TestKeyedJSONL: an entry with a path writes each record with the chosen keys, the step's
// own fields and the rest of the record as steps.jsonl has them; a continued run finds its
// last step, and a resume from an earlier one cuts the steps after it out.
func TestKeyedJSONL(t *testing.T) {
	out := t.TempDir()
	path := filepath.Join(out, "lean.jsonl")
	env := Env{OutDir: out, MetricPrefix: "vllm"}
	p, err := JSONLType.Parse(env, sinkspec.Parse(t, "sinks[0]", "{type: jsonl, path: "+path+", keys: summary, exclude: ['vllm/*/mfu']}"))
	if err != nil {
		t.Fatal(err)
	}
	if h, ok, err := p.LastStep(); ok || err != nil {
		t.Fatalf("a file not written yet holds step %v, %v", h, err)
	}
	s, err := p.Open(env)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*step.Record
	for i := range 3 {
		r := &step.Record{Step: int64(5 + i), DurationS: 2, Workers: 3, Scrapes: step.Scrapes{OK: 6},
			Metrics:   map[string]float64{"vllm/prefix_cache_hit_rate": 0.5, "vllm/time/idle_s": 1, "vllm/mfu": 0.25},
			Phases:    map[string]*step.Phase{"rollout": {DurationS: 1, Intervals: 1, Metrics: map[string]float64{"vllm/mfu": 0.3, "vllm/generation_tokens_per_s": 9}}},
			PerWorker: []step.WorkerRecord{{Target: "http://a:8000/metrics", Metrics: map[string]float64{"vllm/prefix_cache_hit_rate": 0.75, "vllm/time/idle_s": 2}}}}
		recs = append(recs, r)
		if err := s.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if len(lines) != len(recs) {
		t.Fatalf("%d lines, want %d", len(lines), len(recs))
	}
	want := `{"step":5,"start":"0001-01-01T00:00:00Z","end":"0001-01-01T00:00:00Z","duration_s":2,"scrapes":{"ok":6,"failed":0},"workers":3,` +
		`"metrics":{"vllm/mfu":0.25,"vllm/prefix_cache_hit_rate":0.5},"phases":{"rollout":{"duration_s":1,"intervals":1,"metrics":{"vllm/generation_tokens_per_s":9}}},` +
		`"per_worker":[{"target":"http://a:8000/metrics","engine":"","metrics":{"vllm/prefix_cache_hit_rate":0.75}}]}`
	if lines[0] != want {
		t.Errorf("line\n%s\nwant\n%s", lines[0], want)
	}
	if len(recs[0].Metrics) != 3 || len(recs[0].Phases["rollout"].Metrics) != 2 {
		t.Error("the sink changed the record it was given")
	}
	if h, ok, err := p.LastStep(); !ok || err != nil || h.Step != 7 || h.File != path {
		t.Errorf("last step %+v %v %v, want 7 in %s", h, ok, err, path)
	}
	cuts, err := p.CutAfter(5)
	if err != nil || len(cuts) != 1 || cuts[0].Records != 2 {
		t.Fatalf("cut %+v, %v; want 2 records", cuts, err)
	}
	if lines := readLines(t, path); len(lines) != 1 || !strings.HasPrefix(lines[0], `{"step":5,`) {
		t.Errorf("after the cut: %q", lines)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("not JSON: %s", sc.Text())
		}
		out = append(out, sc.Text())
	}
	return out
}
