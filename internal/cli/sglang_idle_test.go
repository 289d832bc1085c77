package cli

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
)

// idleScrape is the scrape interval of TestSGLangIdleAgainstTruth, in simulated seconds.
const idleScrape = 250 * time.Millisecond

// idleFleet is an async loop on 2 SGLang servers of one engine each whose engines idle most of
// each step: a GRPO batch of a fraction of a second, then 3 s of the trainer's update, a
// publish every 5 s. Every time of the loop is a multiple of idleScrape, so that each step ends
// at a scrape.
func idleFleet(t *testing.T, stages, eager bool) sim.Config {
	t.Helper()
	sc := sim.DefaultConfig()
	sc.Engine = sim.EngineSGLang
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = 2, 1, 0, 1, 11
	sc.SGLangStageMetrics, sc.SGLangEagerGauges = stages, eager
	w := &sc.Workload
	w.Prompts, w.Samples, w.OutputMedian, w.OutputSigma, w.MaxTokens = 2, 4, 40, 0.3, 256
	w.StartDelay = time.Second
	w.Async, w.Pause = true, 3*time.Second
	w.StepTime, w.Lag, w.LoadTime = 5*time.Second, time.Second, 500*time.Millisecond
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	return sc
}

// idleRun is a run of the tracker over a simulation: each step's record, and each engine's
// busy periods in each step (a busy period counts in the step where it starts).
type idleRun struct {
	records []step.Record
	busy    [][]int // by engine, by step
	truth   sim.GroundTruth
}

// runIdleFleet drives the simulation on its own clock: a scrape of every server every
// idleScrape, the step ending at the scrape at each end the simulator's loop makes, until
// steps steps ended. The simulator's ground truth is sampled every 10 ms to count the engines'
// busy periods.
func runIdleFleet(t *testing.T, cfg sim.Config, steps int) idleRun {
	t.Helper()
	s, err := sim.NewSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	epoch := time.Unix(1_800_000_000, 0)
	tr := step.NewTracker(step.Options{PerWorker: true})
	tr.Begin(epoch)
	run := idleRun{busy: make([][]int, cfg.Servers)}
	generating := make([]bool, cfg.Servers)
	const fine = 10 * time.Millisecond
	for at := time.Duration(0); len(run.records) < steps; at += idleScrape {
		if at > time.Duration(steps+2)*cfg.Workload.StepTime+10*time.Second {
			t.Fatalf("%d steps ended by %s, want %d", len(run.records), at, steps)
		}
		for f := at - idleScrape + fine; f <= at; f += fine {
			s.AdvanceTo(max(f, 0))
			g := s.GroundTruth()
			for i, e := range g.Engines {
				now := e.State == sim.StateGenerating
				if now && !generating[i] {
					for len(run.busy[i]) <= len(run.records) {
						run.busy[i] = append(run.busy[i], 0)
					}
					run.busy[i][len(run.records)]++
				}
				generating[i] = now
			}
		}
		s.AdvanceTo(at)
		ts := epoch.Add(at)
		for i := range cfg.Servers {
			pg, err := page.ParsePage(s.Page(i, epoch))
			if err != nil {
				t.Fatal(err)
			}
			tr.Observe(ts, "http://server"+strconv.Itoa(i), pg, nil)
		}
		if ends := s.GroundTruth().StepEnds; len(ends) > len(run.records) {
			if ends[len(run.records)] != at {
				t.Fatalf("step %d ends at %s, between two scrapes", len(run.records)+1, ends[len(run.records)])
			}
			run.records = append(run.records, tr.EndStep(int64(len(run.records)+1), ts))
		}
	}
	run.truth = s.GroundTruth()
	return run
}

// stepTruth is the simulator's engine-seconds of step k (from 0), over every engine, by state.
func (r *idleRun) stepTruth(k int) (all float64, by [sim.NumStates]float64) {
	for _, e := range r.truth.Engines {
		for s, d := range e.Steps[k].Time {
			by[s] += d.Seconds()
			all += d.Seconds()
		}
	}
	return all, by
}

// TestSGLangIdleAgainstTruth runs an async loop of 6 steps on a simulated SGLang fleet whose
// engines idle most of each step, scraped every 250 ms on the simulator's own clock, and holds
// each step's ledger to the simulator's ground truth:
//   - with the scheduler's stage counters, each step's idle time is the engines' idle time
//     within 5 % of the step's engine-seconds;
//   - without them, whether the gauges are set at SGLang's log points only or after every
//     iteration, generating never exceeds the engines' generating time by more than one
//     scrape interval per engine per busy period; with the lazy gauges the rest of the time
//     the pages showed running requests is undetermined, with the eager ones there is none.
func TestSGLangIdleAgainstTruth(t *testing.T) {
	const steps = 6
	for _, tt := range []struct {
		name          string
		stages, eager bool
	}{
		{"stage counters", true, false},
		{"lazy gauges", false, false},
		{"eager gauges", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runIdleFleet(t, idleFleet(t, tt.stages, tt.eager), steps)
			var undetermined, idleTruth float64
			for k, rec := range r.records {
				m := rec.Metrics
				all, truth := r.stepTruth(k)
				idleTruth += truth[sim.StateIdle]
				got := func(s step.State) float64 { return m["sglang/"+step.StateKey(s)] }
				if e := m["sglang/"+step.NameEngineTime]; math.Abs(e-all) > 1e-6 {
					t.Errorf("step %d: engine_s %v, the simulator's engines %v", k+1, e, all)
				}
				label := fmt.Sprintf("step %d (%.2f engine-s): generating %.3f idle %.3f undetermined %.3f; truth generating %.3f idle %.3f",
					k+1, all, got(step.Generating), got(step.Idle), got(step.Undetermined), truth[sim.StateGenerating], truth[sim.StateIdle])
				t.Log(label)
				undetermined += got(step.Undetermined)
				if tt.stages {
					if d := math.Abs(got(step.Idle) - truth[sim.StateIdle]); d > 0.05*all {
						t.Errorf("%s: idle off by %.3f s, more than 5%% of the step", label, d)
					}
					if got(step.Undetermined) != 0 {
						t.Errorf("%s: undetermined with the engine's own counts", label)
					}
					continue
				}
				periods := 0
				for i := range r.busy {
					if k < len(r.busy[i]) {
						periods += r.busy[i][k]
					}
				}
				if over := got(step.Generating) - truth[sim.StateGenerating]; over > float64(periods)*idleScrape.Seconds()+1e-6 {
					t.Errorf("%s: generating %.3f s over the truth, more than %d busy periods' scrape interval", label, over, periods)
				}
			}
			switch {
			case idleTruth == 0:
				t.Fatal("the engines never idled: the loop does not test the ledger's idle")
			case tt.stages || tt.eager:
				if undetermined != 0 {
					t.Errorf("%.3f engine-s undetermined, want none", undetermined)
				}
			case undetermined == 0:
				t.Error("no time undetermined: the lazy gauges never repeated an old log point")
			}
		})
	}
}
