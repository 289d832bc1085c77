package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/csv"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestResumeAfterALastLineWithoutNewline: a run killed after writing a whole step but before its
// newline left it without one; opening steps.jsonl keeps it (adding the newline), so it is the
// step the next run continues after, and no step number comes twice.
func TestResumeAfterALastLineWithoutNewline(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 31)
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "steps.jsonl"), []byte(`{"step":1,"metrics":{}}`+"\n"+`{"step":2,"metrics":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLive(t, out, "--target", a.url())
	if code, _ := l.tryEndStep(2); code != http.StatusConflict {
		t.Fatalf("step 2 again: %d, want 409", code)
	}
	l.endStep(3)
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	steps, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
	var got []int64
	for _, s := range steps {
		got = append(got, s.Step)
	}
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("steps %v, want [1 2 3]", got)
	}
	if !strings.Contains(l.stderr.String(), "last_step=2") {
		t.Errorf("the run did not say it continues after step 2:\n%s", l.stderr.String())
	}
}

// TestResumeMovesAGarbageLastLineAside: steps.jsonl ends with a whole line that is not JSON
// (a line written by something else, or mangled on disk). Opening the file takes that line out
// into steps.jsonl.corrupt-1, as it is, and says so; the run continues after the last step, and
// steps.jsonl holds only step records.
func TestResumeMovesAGarbageLastLineAside(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 32)
	out := t.TempDir()
	steps := filepath.Join(out, "steps.jsonl")
	if err := os.WriteFile(steps, []byte(`{"step":1,"metrics":{}}`+"\n"+`{"step":2,"metrics":{}}`+"\n"+"#### not a step ####\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLive(t, out, "--target", a.url())
	l.endStep(3)
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	recs, _ := readSteps(t, steps)
	var got []int64
	for _, s := range recs {
		got = append(got, s.Step)
	}
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("steps %v, want [1 2 3]", got)
	}
	kept, err := os.ReadFile(steps + ".corrupt-1")
	if err != nil || string(kept) != "#### not a step ####\n" {
		t.Fatalf("steps.jsonl.corrupt-1: %q, %v; want the line taken out", kept, err)
	}
	if log := l.stderr.String(); !strings.Contains(log, "steps.jsonl.corrupt-1") || !strings.Contains(log, "last_step=2") {
		t.Errorf("the run did not name the file the line went to, or the step it continues after:\n%s", log)
	}
}

// runUntilStarted runs "vllmstat run" with args in-process until it exits by itself or has
// started scraping, then stops it, and returns its exit code, stderr, and whether it started.
func runUntilStarted(t *testing.T, args ...string) (code int, stderr string, started bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errb := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() { done <- runWith(ctx, "run", args, &bytes.Buffer{}, errb) }()
	testkit.Poll(10*time.Second, func() bool {
		return len(done) > 0 || strings.Contains(errb.String(), `msg=scraping`)
	})
	started = strings.Contains(errb.String(), `msg=scraping`)
	cancel()
	return <-done, errb.String(), started
}

// TestResumeRefusesABadLastStep: steps.jsonl's last step record has a step number no run can
// continue after. After 1e18 every end_step was a 409 and a timer run wrote nothing and exited
// 0; after -5 a timer run wrote steps 1, 2 and 3 again. The run refuses to start instead, names
// the line and says what to do, and leaves the out_dir's files as they were.
func TestResumeRefusesABadLastStep(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 33)
	for _, tt := range []struct {
		name, last, shown string
	}{
		{"1e18", `{"step":1000000000000000000,"metrics":{}}`, "1000000000000000000"},
		{"negative", `{"step":-5,"metrics":{}}`, "-5"},
		{"2^53", `{"step":9007199254740992}`, "9007199254740992"},
		{"exponent", `{"step":1e18}`, "1e18"},
		{"fraction", `{"step":2.5}`, "2.5"},
		{"string", `{"step":"3"}`, `"3"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			path := filepath.Join(out, "steps.jsonl")
			content := `{"step":1,"metrics":{}}` + "\n" + `{"step":2,"metrics":{}}` + "\n" + tt.last + "\n"
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stderr, started := runUntilStarted(t, "--interval", "0.1", "--scrape-timeout", "5s", "--step-every", "1s",
				"--listen", "", "--out", out, "--target", a.url())
			if started || code != exitError {
				t.Fatalf("the run started (%v) and exited %d, want a refusal with exit %d\n%s", started, code, exitError, stderr)
			}
			for _, want := range []string{path, "line 3", "step " + tt.shown, "9007199254740991", "fix or delete that line"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if got := mustRead(t, path); string(got) != content {
				t.Errorf("steps.jsonl changed: %q", got)
			}
		})
	}
}

// TestResumePassesOverLinesThatAreNoStep: steps.jsonl ends with lines that are JSON but no step
// record ({}, a note, null, a null step). The run continues after the last real step: ending
// it again is a 409, the next one is written after those lines, which stay as they were.
func TestResumePassesOverLinesThatAreNoStep(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 34)
	out := t.TempDir()
	path := filepath.Join(out, "steps.jsonl")
	before := `{"step":1,"metrics":{}}` + "\n" + `{"step":2,"metrics":{}}` + "\n" + "{}\n" + `{"note":"x"}` + "\n" + "null\n" + `{"step":null}` + "\n"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLive(t, out, "--target", a.url())
	if code, _ := l.tryEndStep(2); code != http.StatusConflict {
		t.Errorf("step 2 again: %d, want 409", code)
	}
	l.endStep(3)
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	b := mustRead(t, path)
	rest, ok := strings.CutPrefix(string(b), before)
	if !ok || strings.Count(rest, "\n") != 1 || !strings.HasPrefix(rest, `{"step":3,`) {
		t.Fatalf("steps.jsonl ends %.300q, want the lines before, then step 3's", b[len(before)/2:])
	}
	if !strings.Contains(l.stderr.String(), "last_step=2") {
		t.Errorf("the run did not say it continues after step 2:\n%s", l.stderr.String())
	}
}

// eventFileSteps reads the steps of a TensorBoard event file's summary events: TFRecord
// framing (length, its CRC, data, its CRC) around Event protos, whose field 2 is the step
// (left out when 0) and field 5 the summary.
func eventFileSteps(t *testing.T, path string) []int64 {
	t.Helper()
	b := mustRead(t, path)
	var steps []int64
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatalf("%s: %d bytes after the last record", path, len(b))
		}
		n := binary.LittleEndian.Uint64(b)
		if uint64(len(b)) < 16+n {
			t.Fatalf("%s: a record runs past the end", path)
		}
		ev := b[12 : 12+n]
		b = b[16+n:]
		var step int64
		summary := false
		for len(ev) > 0 {
			num, typ, k := protowire.ConsumeTag(ev)
			if k < 0 {
				t.Fatalf("%s: bad event", path)
			}
			ev = ev[k:]
			if num == 2 && typ == protowire.VarintType {
				v, k := protowire.ConsumeVarint(ev)
				step, ev = int64(v), ev[max(k, 0):]
				continue
			}
			summary = summary || num == 5
			k = protowire.ConsumeFieldValue(num, typ, ev)
			if k < 0 {
				t.Fatalf("%s: bad event", path)
			}
			ev = ev[k:]
		}
		if summary {
			steps = append(steps, step)
		}
	}
	return steps
}

// csvSteps reads the step column of a CSV file after its header.
func csvSteps(t *testing.T, path string) []int64 {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(mustRead(t, path))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, r := range rows[1:] {
		n, err := strconv.ParseInt(r[0], 10, 64)
		if err != nil {
			t.Fatalf("%s: row %q", path, r)
		}
		steps = append(steps, n)
	}
	return steps
}

// TestResumeAfterTheStepsOfTheSinks: steps.jsonl was deleted, steps.csv and the TensorBoard
// event file kept. A timer run then wrote steps 1 and 2 after the old 1-3 in steps.csv and in a
// second event file, without a word. The run says at start which files hold steps that
// steps.jsonl does not, and continues after the last of them: the trackers keep one step axis,
// and a trainer that resumes at step 4 can end step 4.
func TestResumeAfterTheStepsOfTheSinks(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 35)
	out := t.TempDir()
	sinks := runWithSinks(t, a, out, 3)
	first, _ := filepath.Glob(filepath.Join(out, "tensorboard", "events.out.tfevents.*"))
	if len(first) != 1 || fmt.Sprint(eventFileSteps(t, first[0])) != "[1 2 3]" {
		t.Fatalf("first run's event files %v, want one with steps 1-3", first)
	}
	path := filepath.Join(out, "steps.jsonl")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}

	// A timer run, stopped once it has written two steps.
	l := startLive(t, out, append(sinks, "--step-every", "0.2s")...)
	if !testkit.Poll(20*time.Second, func() bool { return bytes.Count(mustReadOrNil(path), []byte("\n")) >= 2 }) {
		t.Fatalf("no two timer steps\n%s", l.stderr.String())
	}
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	recs, _ := readSteps(t, path)
	var got []int64
	for _, r := range recs {
		got = append(got, r.Step)
	}
	if len(got) < 2 || got[0] != 4 {
		t.Fatalf("steps.jsonl steps %v, want them to go on from 4", got)
	}
	if s := csvSteps(t, filepath.Join(out, "steps.csv")); fmt.Sprint(s) != fmt.Sprint(append([]int64{1, 2, 3}, got...)) {
		t.Errorf("steps.csv steps %v, want 1-3 then %v", s, got)
	}
	files, _ := filepath.Glob(filepath.Join(out, "tensorboard", "events.out.tfevents.*"))
	slices.Sort(files)
	var tb []int64
	for _, f := range files {
		tb = append(tb, eventFileSteps(t, f)...)
	}
	if fmt.Sprint(tb) != fmt.Sprint(append([]int64{1, 2, 3}, got...)) {
		t.Errorf("event files %v hold steps %v in name order, want 1-3 then %v", files, tb, got)
	}
	log := l.stderr.String()
	for _, want := range []string{filepath.Join(out, "steps.csv"), first[0], "last_step=3"} {
		if !strings.Contains(log, want) {
			t.Errorf("the run did not say %q at start:\n%s", want, log)
		}
	}
}

// mustReadOrNil is the content of path, nil when it cannot be read (yet).
func mustReadOrNil(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// runWithSinks runs "vllmstat run" against a with the tensorboard and csv sinks into out, ends
// steps 1 to n over the API and stops; it returns the run's arguments, for a run after it.
func runWithSinks(t *testing.T, a *fakeServer, out string, n int) []string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "vllmstat.yaml")
	if err := os.WriteFile(cfg, []byte("vllm_metrics_log_timeline_plots: false\nsinks: [tensorboard, csv]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--target", a.url(), "--config", cfg}
	l := startLive(t, out, args...)
	for i := 1; i <= n; i++ {
		l.endStep(i)
	}
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	return args
}
