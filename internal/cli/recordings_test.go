package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// updateSteps rewrites the steps.jsonl of the recordings from their replay; -update (testkit's)
// records them again, from runs against the simulator.
var updateSteps = flag.Bool("update-steps", false, "rewrite the steps.jsonl of the recordings under testdata/recordings from their replay, keeping the recordings")

// recordings are the runs kept under testdata/recordings/NAME: run.jsonl.gz (and its later
// segments) and the steps.jsonl the live run wrote. Each run is "vllmstat record" against a
// simulated fleet with --per-worker, ending a step over the API now and then.
var recordings = []struct {
	name  string
	runs  int // runs with the same recording and out_dir: a restart makes a second segment
	steps int // steps ended over the API per run (the run adds its last one at exit)
}{
	{"one-run", 1, 3},
	{"restart", 2, 2},
}

// TestReplayRecordings replays each kept recording: the output must equal the steps.jsonl its
// live run wrote, byte for byte, across segments too. -update records them again; -update-steps
// only rewrites steps.jsonl from replay, for a change to the records that the same scrapes
// explain (check the diff: keys that existed must keep their values).
func TestReplayRecordings(t *testing.T) {
	for _, rc := range recordings {
		t.Run(rc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "recordings", rc.name)
			if testkit.Update() {
				makeRecording(t, dir, rc.runs, rc.steps)
			}
			rec := filepath.Join(dir, "run.jsonl.gz")
			segs, err := record.Segments(rec)
			if err != nil {
				t.Fatal(err)
			}
			if len(segs) != rc.runs {
				t.Fatalf("%d segments, want %d", len(segs), rc.runs)
			}
			want := mustRead(t, filepath.Join(dir, "steps.jsonl"))
			var out, errb bytes.Buffer
			if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &out, &errb); code != 0 || errb.Len() > 0 {
				t.Fatalf("replay exited %d: %s", code, errb.String())
			}
			if *updateSteps && !testkit.Update() {
				// Replay equals the live run (same tracker), so this is what a run would write.
				if err := os.WriteFile(filepath.Join(dir, "steps.jsonl"), out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				want = out.Bytes()
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Fatalf("replay differs from the live steps.jsonl\nreplay:\n%s\nlive:\n%s", out.String(), want)
			}
			if n := bytes.Count(want, []byte("\n")); n != rc.runs*(rc.steps+1) {
				t.Errorf("live steps.jsonl has %d steps, want %d", n, rc.runs*(rc.steps+1))
			}
		})
	}
}

// makeRecording records runs against a small simulated fleet into dir, from scratch.
func makeRecording(t *testing.T, dir string, runs, steps int) {
	t.Helper()
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sc := sim.DefaultConfig()
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = 1, 2, 0, 4, 7
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	out := t.TempDir()
	for range runs {
		l := startLive(t, out, "--target", fleet.URLs()[0], "--record", filepath.Join(dir, "run.jsonl.gz"), "--per-worker", "--interval", "0.25")
		for n := 1; n <= steps; n++ {
			// a step of a few scrapes: wait for them through the live view
			before := l.liveScrapes()
			testkit.WaitFor(t, 10*time.Second, "the fleet to be scraped", func() bool { return l.liveScrapes() >= before+3 })
			l.endStep(n)
		}
		if code := l.stop(); code != 0 {
			t.Fatalf("exit %d\n%s", code, l.stderr.String())
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "steps.jsonl"), mustRead(t, filepath.Join(out, "steps.jsonl")), 0o644); err != nil {
		t.Fatal(err)
	}
}
