package selfmetrics

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/promtest"
	"github.com/vllmstat/vllmstat/internal/step"
)

// walked lists every series WalkStep makes of r, in its order.
func walked(prefix string, r *step.Record) []string {
	var out []string
	WalkStep(prefix, r, func(name string, labels []Label, v float64) {
		out = append(out, fmt.Sprintf("%s%v %v", name, labels, v))
	})
	return out
}

// A tracker's record is named from its typed values; the same record read back from its JSON
// line has only keys. Both must give the same series in the same order, split labels,
// statistics, worst workers and per-worker keys included.
func TestWalkStepValuesMatchKeys(t *testing.T) {
	for _, prefix := range []string{"vllm", "rl/gen-1"} {
		run, err := promtest.SimulateRun(promtest.RunOptions{Servers: 2, DP: 2, Steps: 3, Scrapes: 5, Interval: time.Second,
			End: time.Unix(1_800_000_000, 0), Prefix: prefix, PerWorker: true, Seed: 5, SpecDecode: 3, KVConnector: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range run.Records {
			r := &run.Records[i]
			if len(r.Values) == 0 || len(r.PerWorker) == 0 || len(r.PerWorker[0].Values) == 0 {
				t.Fatalf("step %d: the tracker's record has no typed values", r.Step)
			}
			keyed := *r
			keyed.Values = nil
			keyed.PerWorker = slices.Clone(r.PerWorker)
			for j := range keyed.PerWorker {
				keyed.PerWorker[j].Values = nil
			}
			got, want := walked(prefix, r), walked(prefix, &keyed)
			if !slices.Equal(got, want) {
				t.Errorf("prefix %q step %d: series from values\n%v\nwant, as from keys,\n%v", prefix, r.Step, got, want)
			}
			if n := 5 + len(r.Metrics); len(got) < n {
				t.Errorf("prefix %q step %d: %d series, want at least %d", prefix, r.Step, len(got), n)
			}
		}
	}
}
