package collector

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestKeptStepsAreTheirJSON checks that the steps kept for the API give the JSON lines of the
// records the sinks got, without holding the records' timelines and values, and that the sinks'
// records keep theirs.
func TestKeptStepsAreTheirJSON(t *testing.T) {
	s := newCounterServer(t)
	var got []*step.Record
	c, _, stop := start(t, Options{Targets: targets(s.srv.URL), NoFinalStep: true,
		Tracker: step.Options{PerWorker: true, Scalars: true}, OnStep: func(r *step.Record) { got = append(got, r) }})
	ctx := context.Background()
	testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { return s.n.Load() == 1 })
	for n := range int64(2) {
		if _, err := c.EndStep(ctx, n+1); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := c.Steps(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || len(got) != 2 {
		t.Fatalf("%d steps kept, %d given to OnStep; want 2 and 2", len(kept), len(got))
	}
	for i := range kept {
		k, r := &kept[i], got[i]
		if k.Timeline != nil || k.Values != nil || len(k.PerWorker) != 1 || k.PerWorker[0].Values != nil {
			t.Errorf("step %d: the kept record holds its timeline or values", k.Step)
		}
		if r.Timeline == nil || r.Values == nil || len(r.PerWorker) != 1 || r.PerWorker[0].Values == nil {
			t.Errorf("step %d: the record given out lost its timeline or values", r.Step)
		}
		kl, err1 := step.MarshalLine(k)
		rl, err2 := step.MarshalLine(r)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bytes.Equal(kl, rl) {
			t.Errorf("step %d: kept record's line\n%s differs from\n%s", k.Step, kl, rl)
		}
	}
}
