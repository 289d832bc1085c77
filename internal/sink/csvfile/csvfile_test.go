package csvfile_test

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/e2etest"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/sink/csvfile"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit/sinkspec"
)

func TestSettings(t *testing.T) {
	env := sink.Env{OutDir: t.TempDir()}
	for _, tt := range []struct{ yaml, err string }{
		{"{type: csv, keys: [vllm/a]}", ""},
		{"{type: csv}", ""}, // the default keys
		{"{type: csv, keys: []}", "sinks[0].keys (line 1): empty"},
		{"{type: csv, keys: [vllm/a], pth: x}", "did you mean path?"},
		{"{type: csv, keys: [vllm/a], path: ''}", "must be a file path"},
		{"{type: csv, keys: summary}", ""},
		{"{type: csv, keys: standard, include: ['vllm/time/*'], exclude: ['vllm/policy/*']}", ""},
		{"{type: csv, exclude: ['vllm/num_preemptions']}", ""},
		{"{type: csv, keys: [vllm/a], include: ['vllm/*/mfu']}", ""},
		{"{type: csv, keys: sumary}", `sinks[0].keys (line 1): "sumary" is not allowed: must be a list of metric keys`},
		{"{type: csv, keys: {a: b}}", "sinks[0].keys (line 1): a mapping is not allowed"},
		{"{type: csv, keys: [vllm/a, [b]]}", "sinks[0].keys[1] (line 1): a list is not allowed: must be a string"},
		{"type: csv\nkeys: summary\ninclude: ['vllm/[a']\n", `sinks[0].include[0] (line 3): "vllm/[a" is not allowed: not a glob`},
		{"{type: csv, keys: all, include: [a]}", "sinks[0].include (line 1): adds keys to a preset"},
	} {
		_, err := csvfile.Type.Parse(env, sinkspec.Parse(t, "sinks[0]", tt.yaml))
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: %v, want %q", tt.yaml, err, tt.err)
		}
	}
}

// An entry without keys gets the step summary's figures of the fleet's engines, under their
// prefixes: an SGLang fleet's csv is not a file of empty vLLM columns, and a mixed fleet's has
// both kinds'.
func TestDefaultColumnsFollowTheFleet(t *testing.T) {
	rec := func(keys ...string) *step.Record {
		r := &step.Record{Step: 1, End: time.Unix(1_700_000_000, 0), Metrics: map[string]float64{}}
		for _, k := range keys {
			r.Metrics[k] = 0.5
		}
		return r
	}
	for _, tt := range []struct {
		name, prefix string
		r            *step.Record
		want         []string // the first column after step and end, and the last
	}{
		{"vLLM", "vllm", rec("vllm/prefix_cache_hit_rate"), []string{"vllm/prefix_cache_hit_rate", "vllm/straggler_tail_s"}},
		{"SGLang", "vllm", rec("sglang/prefix_cache_hit_rate"), []string{"sglang/prefix_cache_hit_rate", "sglang/straggler_tail_s"}},
		{"mixed", "vllm", rec("vllm/generation_tokens", "sglang/generation_tokens"), []string{"vllm/prefix_cache_hit_rate", "sglang/straggler_tail_s"}},
		{"no engine", "vllm", rec(), []string{"vllm/prefix_cache_hit_rate", "vllm/straggler_tail_s"}},
		{"run's prefix", "rollout/vllm", rec("rollout/sglang/num_preemptions"), []string{"rollout/sglang/prefix_cache_hit_rate", "rollout/sglang/straggler_tail_s"}},
		{"one prefix for all", "rollout", rec("rollout/num_preemptions"), []string{"rollout/prefix_cache_hit_rate", "rollout/straggler_tail_s"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			env := sink.Env{OutDir: out, MetricPrefix: tt.prefix}
			p, err := csvfile.Type.Parse(env, sinkspec.Parse(t, "sinks[0]", "{type: csv}"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := p.Open(env)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Write(context.Background(), tt.r); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			rows := readCSV(t, filepath.Join(out, "steps.csv"))
			h := rows[0]
			if len(rows) != 2 || h[2] != tt.want[0] || h[len(h)-1] != tt.want[1] {
				t.Errorf("columns %v (%d rows), want %s ... %s", h, len(rows), tt.want[0], tt.want[1])
			}
		})
	}
}

// With a preset, an include or an exclude, the columns are the chosen keys of the first step,
// phases' among them, sorted, after the listed ones.
func TestChosenColumns(t *testing.T) {
	r := &step.Record{Step: 4, End: time.Unix(1_700_000_000, 0), Metrics: map[string]float64{
		"vllm/prefix_cache_hit_rate": 0.5, "vllm/prefix_cache_hit_rate/p95": 0.9, "vllm/time/idle_s": 2,
		"vllm/num_preemptions": 3, "vllm/mfu": 0.25},
		Phases: map[string]*step.Phase{"rollout": {Metrics: map[string]float64{"vllm/mfu": 0.375, "vllm/time/idle_s": 1}}}}
	for _, tt := range []struct{ settings, want string }{
		{"keys: summary", "vllm/mfu,vllm/num_preemptions,vllm/prefix_cache_hit_rate,vllm/rollout/mfu"},
		{"keys: summary, exclude: ['vllm/*/mfu', 'vllm/num_*']", "vllm/mfu,vllm/prefix_cache_hit_rate"},
		{"keys: all", "vllm/mfu,vllm/num_preemptions,vllm/prefix_cache_hit_rate,vllm/prefix_cache_hit_rate/p95,vllm/rollout/mfu,vllm/rollout/time/idle_s,vllm/time/idle_s"},
		{"include: ['vllm/*/time/*']", "vllm/rollout/time/idle_s"},
		{"keys: [vllm/time/idle_s, vllm/mfu], include: ['vllm/*/mfu']", "vllm/time/idle_s,vllm/mfu,vllm/rollout/mfu"},
		{"keys: [vllm/time/idle_s, vllm/mfu], exclude: ['vllm/time/*']", "vllm/mfu"},
		{"exclude: ['vllm/kv_cache_usage_perc/*', 'vllm/num_requests_*/*', 'vllm/time_to_first_token_seconds/*']",
			"vllm/prefix_cache_hit_rate,vllm/num_preemptions,vllm/generation_tokens_per_s,vllm/straggler_tail_s"},
	} {
		t.Run(tt.settings, func(t *testing.T) {
			out := t.TempDir()
			env := sink.Env{OutDir: out, MetricPrefix: "vllm"}
			p, err := csvfile.Type.Parse(env, sinkspec.Parse(t, "sinks[0]", "{type: csv, "+tt.settings+"}"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := p.Open(env)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Write(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			rows := readCSV(t, filepath.Join(out, "steps.csv"))
			if got := strings.Join(rows[0], ","); got != "step,end,"+tt.want {
				t.Errorf("columns %s, want step,end,%s", got, tt.want)
			}
			if len(rows) != 2 || rows[1][0] != "4" {
				t.Fatalf("rows %v", rows)
			}
			m := r.Scalars("vllm")
			for i, k := range rows[0][2:] {
				want := ""
				if v, ok := m[k]; ok {
					want = strconv.FormatFloat(v, 'g', -1, 64)
				}
				if rows[1][2+i] != want {
					t.Errorf("%s: %q, want %q", k, rows[1][2+i], want)
				}
			}
		})
	}
}

// TestRunWritesCSV runs "vllmstat run" with a csv sink and reads the file back with
// encoding/csv: a header, then one row per step of steps.jsonl with its values.
func TestRunWritesCSV(t *testing.T) {
	out := t.TempDir()
	keys := []string{"vllm/generation_tokens", "vllm/prefix_cache_hit_rate", "vllm/no_such_key"}
	e2etest.Run(t, out, "sinks: [{type: csv, keys: ["+strings.Join(keys, ", ")+"]}]\n", 2)
	f, err := os.Open(filepath.Join(out, "steps.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	recs := e2etest.Steps(t, out)
	if len(rows) != len(recs)+1 || strings.Join(rows[0], ",") != "step,end,"+strings.Join(keys, ",") {
		t.Fatalf("%d rows for %d steps; header %v", len(rows), len(recs), rows[0])
	}
	for i, r := range recs {
		row := rows[i+1]
		if row[0] != strconv.FormatInt(r.Step, 10) {
			t.Errorf("row %d: step %s, want %d", i+1, row[0], r.Step)
		}
		for j, k := range keys {
			v, ok := r.Metrics[k]
			want := ""
			if ok {
				want = strconv.FormatFloat(v, 'g', -1, 64)
			}
			if row[2+j] != want {
				t.Errorf("step %d %s: %q, want %q", r.Step, k, row[2+j], want)
			}
		}
	}
}

// TestRunResumedOneHeader runs "vllmstat run" twice into one out_dir, the second continuing the
// first's steps: steps.csv has one header, then one row per step of steps.jsonl, in order.
func TestRunResumedOneHeader(t *testing.T) {
	out := t.TempDir()
	const yaml = "sinks: [{type: csv, keys: [vllm/generation_tokens]}]\n"
	e2etest.Run(t, out, yaml, 2)
	e2etest.Run(t, out, yaml, len(e2etest.Steps(t, out))+2)
	f, err := os.Open(filepath.Join(out, "steps.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	recs := e2etest.Steps(t, out)
	if len(rows) != len(recs)+1 || strings.Join(rows[0], ",") != "step,end,vllm/generation_tokens" {
		t.Fatalf("%d rows for %d steps; header %v", len(rows), len(recs), rows[0])
	}
	for i, r := range recs {
		if rows[i+1][0] != strconv.FormatInt(r.Step, 10) {
			t.Errorf("row %d: step %s, want %d", i+1, rows[i+1][0], r.Step)
		}
	}
}
