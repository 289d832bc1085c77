package csvfile_test

import (
	"context"
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/sink/csvfile"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit/sinkspec"
)

var t0 = time.Date(2025, 7, 1, 12, 0, 0, 0, time.UTC)

// records makes steps from..to-1 with a key a, and phase rollout from step 2 on.
func records(from, to int) []*step.Record {
	var rs []*step.Record
	for i := from; i < to; i++ {
		r := &step.Record{Step: int64(i), Start: t0.Add(time.Duration(i) * time.Minute), End: t0.Add(time.Duration(i+1) * time.Minute),
			Metrics: map[string]float64{"vllm/a": float64(i) / 4}}
		if i >= 2 {
			r.Phases = map[string]*step.Phase{"rollout": {DurationS: 10, Intervals: 1, Metrics: map[string]float64{"vllm/prefix_cache_hit_rate": float64(i) / 10}}}
		}
		if i == 4 {
			r.Phases["rollout"].Metrics["vllm/prefix_cache_hit_rate"] = math.NaN()
		}
		rs = append(rs, r)
	}
	return rs
}

// runInto writes rs as one run with a csv sink of the given settings.
func runInto(t *testing.T, out, settings string, resume bool, rs []*step.Record) {
	t.Helper()
	env := sink.Env{OutDir: out, MetricPrefix: "vllm", Resume: resume}
	p, err := csvfile.Type.Parse(env, sinkspec.Parse(t, "sinks[0]", settings))
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Open(env)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if err := s.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// readCSV parses a file whole with encoding/csv, which refuses rows whose number of cells
// differs from the header's.
func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}

// checkRows checks rows against the records: a header of step, end and keys, then one row per
// record, a phase key's cell empty in a step without the phase.
func checkRows(t *testing.T, rows [][]string, keys []string, rs []*step.Record) {
	t.Helper()
	if want := append([]string{"step", "end"}, keys...); !slices.Equal(rows[0], want) {
		t.Errorf("header %q, want %q", rows[0], want)
	}
	if len(rows) != len(rs)+1 {
		t.Fatalf("%d rows after the header, want %d", len(rows)-1, len(rs))
	}
	for i, r := range rs {
		row := rows[i+1]
		if row[0] != strconv.FormatInt(r.Step, 10) || row[1] != r.End.Format(time.RFC3339Nano) {
			t.Errorf("row %d: step %s end %s, want %d %v", i+1, row[0], row[1], r.Step, r.End)
		}
		for j, k := range keys {
			want := ""
			if v, ok := r.Scalars("vllm")[k]; ok {
				want = strconv.FormatFloat(v, 'g', -1, 64)
			}
			if row[2+j] != want {
				t.Errorf("step %d %s: %q, want %q", r.Step, k, row[2+j], want)
			}
		}
	}
}

// TestPhaseKeys names a phase's key among the columns: empty in the steps before the phase
// first ran, its values after.
func TestPhaseKeys(t *testing.T) {
	out := t.TempDir()
	keys := []string{"vllm/a", "vllm/rollout/prefix_cache_hit_rate", "vllm/eval/prefix_cache_hit_rate"}
	rs := records(0, 6)
	runInto(t, out, "{type: csv, keys: ["+strings.Join(keys, ", ")+"]}", false, rs)
	rows := readCSV(t, filepath.Join(out, "steps.csv"))
	checkRows(t, rows, keys, rs)
	if rows[1][3] != "" || rows[4][3] != "0.3" || rows[5][3] != "NaN" {
		t.Errorf("phase column %q, want empty before the phase, then its values", []string{rows[1][3], rows[4][3], rows[5][3]})
	}
}

// TestResumeOneHeader writes two runs into one out_dir, the second continuing the first's
// steps: one header, then every step's row once.
func TestResumeOneHeader(t *testing.T) {
	out := t.TempDir()
	settings := "{type: csv, keys: [vllm/a, vllm/rollout/prefix_cache_hit_rate]}"
	runInto(t, out, settings, false, records(0, 3))
	runInto(t, out, settings, true, records(3, 6))
	checkRows(t, readCSV(t, filepath.Join(out, "steps.csv")), []string{"vllm/a", "vllm/rollout/prefix_cache_hit_rate"}, records(0, 6))
}

// TestResumeAfterKill continues a file whose last row a kill cut short: the part row is cut
// off, and the rows go on from the last whole one.
func TestResumeAfterKill(t *testing.T) {
	out := t.TempDir()
	settings := "{type: csv, keys: [vllm/a]}"
	runInto(t, out, settings, false, records(0, 3))
	path := filepath.Join(out, "steps.csv")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("3,2025-07-01T12:0")
	f.Close()
	runInto(t, out, settings, true, records(3, 5))
	rs := records(0, 5)
	checkRows(t, readCSV(t, path), []string{"vllm/a"}, rs)
}

// TestOtherColumns starts a run whose keys differ from the existing file's header: the file is
// kept whole under another name, and the run writes a new file with its own header.
func TestOtherColumns(t *testing.T) {
	out := t.TempDir()
	runInto(t, out, "{type: csv, keys: [vllm/a]}", false, records(0, 3))
	path := filepath.Join(out, "steps.csv")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	runInto(t, out, "{type: csv, keys: [vllm/a, vllm/rollout/prefix_cache_hit_rate]}", true, records(3, 5))
	runInto(t, out, "{type: csv, keys: [vllm/rollout/prefix_cache_hit_rate]}", true, records(5, 6))
	kept, err := os.ReadFile(filepath.Join(out, "steps.1.csv"))
	if err != nil || string(kept) != string(before) {
		t.Fatalf("the first file kept as steps.1.csv: %v, same bytes %v", err, string(kept) == string(before))
	}
	checkRows(t, readCSV(t, filepath.Join(out, "steps.2.csv")), []string{"vllm/a", "vllm/rollout/prefix_cache_hit_rate"}, records(3, 5))
	checkRows(t, readCSV(t, path), []string{"vllm/rollout/prefix_cache_hit_rate"}, records(5, 6))
}

// TestNotACSVHeader keeps a file whose first line is no CSV row at all, as one of other columns.
func TestNotACSVHeader(t *testing.T) {
	out := t.TempDir()
	path := filepath.Join(out, "steps.csv")
	if err := os.WriteFile(path, []byte("\"unterminated,x\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runInto(t, out, "{type: csv, keys: [vllm/a]}", true, records(0, 2))
	if b, err := os.ReadFile(filepath.Join(out, "steps.1.csv")); err != nil || string(b) != "\"unterminated,x\n1,2\n" {
		t.Errorf("kept file %q, %v", b, err)
	}
	checkRows(t, readCSV(t, path), []string{"vllm/a"}, records(0, 2))
}

// TestLastStep reads the step of the file's last whole row, as a run does before it opens the
// sinks: none without a file, with the header alone, or with rows that are no steps.
func TestLastStep(t *testing.T) {
	out := t.TempDir()
	env := sink.Env{OutDir: out, MetricPrefix: "vllm"}
	p, err := csvfile.Type.Parse(env, sinkspec.Parse(t, "sinks[0]", "{type: csv, keys: [vllm/a]}"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, "steps.csv")
	check := func(name string, want int64, wantOK bool) {
		t.Helper()
		h, ok, err := p.LastStep()
		if err != nil || ok != wantOK || ok && (h.Step != want || h.File != path) {
			t.Errorf("%s: %+v %v %v, want step %d of %s (%v)", name, h, ok, err, want, path, wantOK)
		}
	}
	check("no file", 0, false)
	runInto(t, out, "{type: csv, keys: [vllm/a]}", false, nil)
	check("the header alone", 0, false)
	runInto(t, out, "{type: csv, keys: [vllm/a]}", true, records(0, 3))
	check("rows", 2, true)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("9,2025-07-01T12:0")
	f.Close()
	check("a part row after the last", 2, true)
	for _, tt := range []struct {
		name, content string
		want          int64
		ok            bool
	}{
		{"2^53", "step,end\n9007199254740992,x\n", 1 << 53, true},
		{"negative", "step,end\n-5,x\n", -5, true},
		{"other columns", "when,loss\n2025-07-01,0.5\n", 0, false},
		{"empty", "", 0, false},
	} {
		if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
			t.Fatal(err)
		}
		check(tt.name, tt.want, tt.ok)
	}
}
