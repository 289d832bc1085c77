package csvfile_test

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/e2etest"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/sink/csvfile"
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
	} {
		_, err := csvfile.Type.Parse(env, sinkspec.Parse(t, "sinks[0]", tt.yaml))
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: %v, want %q", tt.yaml, err, tt.err)
		}
	}
	p, err := csvfile.Type.Parse(sink.Env{OutDir: t.TempDir(), MetricPrefix: "rollout"}, sinkspec.Parse(t, "sinks[0]", "{type: csv}"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(p); !strings.Contains(got, "rollout/prefix_cache_hit_rate") || !strings.Contains(got, "rollout/straggler_tail_s") {
		t.Errorf("default keys %s: want the summary's figures under the run's prefix", got)
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
