package promtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
)

// RunOptions shape a simulated run.
type RunOptions struct {
	Servers, DP int
	Steps       int
	Scrapes     int           // scrapes of every target per step
	Interval    time.Duration // between scrapes
	End         time.Time     // the last step's end
	Prefix      string
	PerWorker   bool
	Seed        int64
	// SpecDecode and KVConnector turn on the simulator's speculative decoding and KV
	// connector (sim.Config's fields of those names).
	SpecDecode  int
	KVConnector bool
}

// Run is what a tracker made of a simulated run: every closed step and every interval.
type Run struct {
	Records   []step.Record
	Intervals []step.Interval
	Targets   []string
}

// SimulateRun drives a simulated fleet (no HTTP, no wall clock) through opt.Steps steps and
// feeds its pages to a step tracker, as the collector would, with timestamps that end at
// opt.End (in whole milliseconds, as Prometheus keeps them).
func SimulateRun(opt RunOptions) (*Run, error) {
	cfg := sim.DefaultConfig()
	cfg.Servers, cfg.DP, cfg.Seed = opt.Servers, opt.DP, opt.Seed
	cfg.SpecDecode, cfg.KVConnector = opt.SpecDecode, opt.KVConnector
	cfg.Workload.StartDelay = 0
	cfg.Workload.Pause = 500 * time.Millisecond
	s, err := sim.NewSim(cfg)
	if err != nil {
		return nil, err
	}
	run := &Run{}
	tr := step.NewTracker(step.Options{
		Prefix: opt.Prefix, PerWorker: opt.PerWorker, Scalars: true,
		OnInterval: func(iv step.Interval) { run.Intervals = append(run.Intervals, iv.Clone()) },
	})
	for i := range cfg.Servers {
		run.Targets = append(run.Targets, fmt.Sprintf("http://sim-%d.test:8000/metrics", i))
	}
	total := time.Duration(opt.Steps*opt.Scrapes) * opt.Interval
	start := opt.End.Truncate(time.Millisecond).Add(-total)
	var t time.Duration
	for n := 1; n <= opt.Steps; n++ {
		for range opt.Scrapes {
			t += opt.Interval
			s.AdvanceTo(t)
			for i, target := range run.Targets {
				// Targets are scraped a millisecond apart, as a pool would.
				ts := start.Add(t + time.Duration(i)*time.Millisecond)
				pg, err := page.ParsePage(s.Page(i, start))
				if err != nil {
					return nil, fmt.Errorf("parse simulated page: %w", err)
				}
				tr.Observe(ts, target, pg, nil)
			}
		}
		end := start.Add(t + time.Duration(len(run.Targets))*time.Millisecond)
		run.Records = append(run.Records, tr.EndStep(int64(n), end))
	}
	return run, nil
}

// WithPhases returns a copy of run's step 2 with phases rollout and eval, whose figures are
// those of steps 0 and 1 (typed values and keys both), and the records they came from.
func WithPhases(t testing.TB, run *Run) (r *step.Record, rollout, eval *step.Record) {
	t.Helper()
	if len(run.Records) < 3 {
		t.Fatalf("%d steps, want 3", len(run.Records))
	}
	rollout, eval = &run.Records[0], &run.Records[1]
	c := run.Records[2]
	c.Phases = map[string]*step.Phase{
		"rollout": {DurationS: 12.5, Intervals: 1, Metrics: rollout.Metrics, Values: rollout.Values},
		"eval":    {DurationS: 3, Intervals: 2, Metrics: eval.Metrics, Values: eval.Values},
	}
	return &c, rollout, eval
}
