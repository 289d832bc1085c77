package collector

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestRemovedTargetReplaysAsLive: a target removed while its counter jumps and then added
// back replays as it ran. Back within the grace period, it goes on with its worker and counts
// the jump; back later, it is a new worker live, and the recording says so with a remove event
// at the point the run forgot it, so replaying it gives the same step records, not the jump.
func TestRemovedTargetReplaysAsLive(t *testing.T) {
	for _, tt := range []struct {
		name string
		away time.Duration // on the collector's clock; the interval is 1 s
		want float64       // step 2's tokens
	}{
		{name: "within the grace period", away: 0, want: 1_000_000},
		{name: "after the grace period", away: 3 * time.Second, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newValueServer(t, 100)
			path := filepath.Join(t.TempDir(), "rec.jsonl")
			rw, err := record.Create(path, record.WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c, fc, stop := start(t, Options{Targets: targets(s.srv.URL), Recorder: rw, NoFinalStep: true})
			ctx := context.Background()
			testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { return s.n.Load() >= 1 })
			var live []step.Record
			s.value.Store(110)
			endStep(t, c, 1, &live)
			if err := c.SetTargets(ctx, nil); err != nil {
				t.Fatal(err)
			}
			fc.Advance(tt.away)
			s.value.Store(1_000_110)
			if err := c.SetTargets(ctx, targets(s.srv.URL)); err != nil {
				t.Fatal(err)
			}
			endStep(t, c, 2, &live)
			s.value.Add(5)
			endStep(t, c, 3, &live)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if got := live[1].Metrics["vllm/generation_tokens"]; got != tt.want {
				t.Fatalf("live step 2 counted %v tokens, want %v", got, tt.want)
			}

			replayed := replayRecording(t, path, step.Options{})
			if len(replayed) != len(live) {
				t.Fatalf("replayed %d steps, live %d", len(replayed), len(live))
			}
			for i := range live {
				a, _ := step.MarshalLine(&live[i])
				b, _ := step.MarshalLine(&replayed[i])
				if string(a) != string(b) {
					t.Errorf("step %d differs:\nlive   %s\nreplay %s", live[i].Step, a, b)
				}
			}
		})
	}
}

// replayRecording computes the step records of the recording at path, as replay does.
func replayRecording(t *testing.T, path string, opt step.Options) []step.Record {
	t.Helper()
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var replayed []step.Record
	keep := func(rec *step.Record) error { replayed = append(replayed, *rec); return nil }
	if err := record.Replay(r, step.NewTracker(opt), record.ReplayOptions{OnStep: keep}); err != nil {
		t.Fatal(err)
	}
	return replayed
}

func endStep(t *testing.T, c *Collector, n int64, out *[]step.Record) {
	t.Helper()
	r, err := c.EndStep(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	*out = append(*out, r)
}
