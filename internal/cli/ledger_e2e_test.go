package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// ledgerSteps is how many steps each run of TestLedgerAgainstSimulator has.
const ledgerSteps = 2

// ledgerScrape is the runs' scrape interval: a simulated span is Speed times as long.
const ledgerScrape = 100 * time.Millisecond

// TestLedgerAgainstSimulator runs "vllmstat run" against the simulator's colocated and async
// loops, on vLLM and on SGLang pages, the trainer ending each step at the loop's own step end
// (the colocated loop's wake-up, the async loop's publish) and marking the colocated rollouts as
// phases. Per step, per worker and per state, the run's engine-seconds are the simulator's own
// (its ground truth) within the spans of the scrapes around each state change (see
// ledgerTolerance); so is each worker's engine time, within the spans around the step's ends.
// Replaying the run's recording gives its steps.jsonl byte for byte.
//
// The fleets are paced by the scrapes (see pacedFleet), so that the page each scrape got is the
// simulation at a known moment. The vLLM runs go at 4 times real speed. The SGLang runs go at
// real speed: SGLang's weight_load_duration_seconds gives a load's length in the simulation's
// seconds, which vllmstat takes back from the scrape in wall seconds. Their SGLang schedulers
// log at every decode batch (--decode-log-interval 1), so that a page's running requests are the
// engine's and generating is told from idle as the simulator tells it.
func TestLedgerAgainstSimulator(t *testing.T) {
	tests := []struct {
		name   string
		engine string
		async  bool
		speed  float64
		states []step.State // the states the loop has: the simulator must have time in each
	}{
		{"vllm colocated", sim.EngineVLLM, false, 4, []step.State{step.Generating, step.Idle, step.Asleep, step.Waking, step.LoadingWeights}},
		{"sglang colocated", sim.EngineSGLang, false, 1, []step.State{step.Generating, step.Idle, step.LoadingWeights}},
		{"vllm async", sim.EngineVLLM, true, 4, []step.State{step.Generating, step.Paused, step.LoadingWeights}},
		{"sglang async", sim.EngineSGLang, true, 1, []step.State{step.Generating, step.Paused, step.LoadingWeights}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := startPacedFleet(t, ledgerFleetConfig(t, tt.engine, tt.async, tt.speed))
			out := t.TempDir()
			rec := filepath.Join(t.TempDir(), "run.jsonl.gz")
			args := []string{"--per-worker", "--record", rec, "--interval", strconv.FormatFloat(ledgerScrape.Seconds(), 'f', -1, 64)}
			for _, u := range p.urls {
				args = append(args, "--target", u)
			}
			l := startLive(t, out, args...)
			trainLoop(t, l, p.fleet, tt.async)
			if code := l.stop(); code != 0 {
				t.Fatalf("run exited %d\n%s", code, l.stderr.String())
			}
			truth := p.fleet.GroundTruth()
			steps, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
			if len(steps) != ledgerSteps || len(truth.StepEnds) < ledgerSteps {
				t.Fatalf("%d steps written, the simulator ended %d; want %d", len(steps), len(truth.StepEnds), ledgerSteps)
			}
			run := readLedgerRun(t, rec, p)
			kind := vllm.VLLM
			if tt.engine == sim.EngineSGLang {
				kind = vllm.SGLang
			}
			simulated := compareLedger(t, p, run, truth, steps, kind)
			for _, s := range tt.states {
				if !simulated[s] {
					t.Errorf("the simulator's engines have no %s time in the steps: the comparison does not test it", s)
				}
			}
			replayEquals(t, rec, filepath.Join(out, "steps.jsonl"))
		})
	}
}

// ledgerFleetConfig is the fleet of TestLedgerAgainstSimulator: 2 servers of 2 engines, small
// batches, and the loop's times in scrape spans, so that every state lasts a few of them.
func ledgerFleetConfig(t *testing.T, engine string, async bool, speed float64) sim.Config {
	sc := sim.DefaultConfig()
	sc.Engine = engine
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = 2, 2, 0, speed, 7
	sc.DecodeLogInterval = 1
	w := &sc.Workload
	// A few long requests per engine: a batch lasts some 10 to 30 scrapes.
	w.Prompts, w.Samples, w.OutputMedian, w.OutputSigma, w.MaxTokens = 4, 8, int(150*speed), 0.3, 1024
	w.StartDelay = 500 * time.Millisecond
	span := time.Duration(speed * float64(ledgerScrape))
	w.LoadTime = 8 * span
	if async {
		w.Async, w.Pause = true, 0
		w.Lag = 3 * span
		w.StepTime = w.Lag + w.LoadTime + time.Second + 8*span // a sync is two handoffs of 0.5 s besides
	} else {
		w.Colocated = true
		w.TrainTime, w.WakeTime, w.Pause = 8*span, 3*span, 3*span
	}
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	return sc
}

// trainLoop is the trainer: it ends steps 1 to ledgerSteps at the loop's own step ends (the
// colocated loop's wake-up, the async loop's publish of the step's version) and marks each
// colocated rollout as phase "rollout".
func trainLoop(t *testing.T, l *liveRun, f *sim.Fleet, async bool) {
	t.Helper()
	for done := 0; done < ledgerSteps; {
		select {
		case e := <-f.Edges():
			switch e.Kind {
			case sim.RolloutStart:
				l.phase("start", phaseRollout)
			case sim.RolloutEnd:
				l.phase("end", phaseRollout)
			case sim.Wake:
				l.endStep(e.Step)
				done++
			}
		case v := <-f.Publishes():
			if async && v.Version > 0 {
				l.endStep(v.Version)
				done++
			}
		case <-time.After(2 * time.Minute): // only a hang gets here
			l.stop()
			t.Fatalf("the loop went on to no next step end\n%s", l.stderr.String())
		}
	}
}

// phase marks a phase edge over the API.
func (l *liveRun) phase(edge, name string) {
	l.t.Helper()
	resp, err := http.Post(l.api+"/v1/phases/"+edge, "application/json", strings.NewReader(fmt.Sprintf(`{"phase": %q}`, name)))
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		l.t.Fatalf("%s phase %s: %d %s", edge, name, resp.StatusCode, b)
	}
}

// ledgerRun is what a run's recording says of its scrapes and steps.
type ledgerRun struct {
	samples map[int][]ledgerSample // by server, in scrape order
	ends    []time.Time            // the steps' ends: step k ends at ends[k-1]
}

// ledgerSample is one scrape: when the run stamped it, and the page it got.
type ledgerSample struct {
	stamp time.Time
	page  pacedPage
}

// readLedgerRun reads the recording rec of a run against p.
func readLedgerRun(t *testing.T, rec string, p *pacedFleet) ledgerRun {
	t.Helper()
	r, err := record.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	run := ledgerRun{samples: map[int][]ledgerSample{}}
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case record.KindStep:
			run.ends = append(run.ends, ev.TS)
			if ev.Step != int64(len(run.ends)) {
				t.Fatalf("recording: step %d ends as the step %d", ev.Step, len(run.ends))
			}
		case record.KindScrape:
			if ev.Body == nil {
				t.Fatalf("recording: a scrape of %s failed: %s", ev.Target, ev.Error)
			}
			pg, ok := p.page(*ev.Body)
			if !ok || p.urls[pg.server] != ev.Target {
				t.Fatalf("recording: a scrape of %s has a page the proxies did not answer for it", ev.Target)
			}
			run.samples[pg.server] = append(run.samples[pg.server], ledgerSample{ev.TS, pg})
		}
	}
	if len(run.ends) < ledgerSteps || len(run.samples) != len(p.urls) {
		t.Fatalf("recording: %d step ends, scrapes of %d servers", len(run.ends), len(run.samples))
	}
	return run
}

// compareLedger compares each worker's ledger in each step with the simulator's ground truth
// truth, within ledgerTolerance, and the fleet's within the sum of its workers' tolerances; it
// returns the states the simulator's engines had time in.
func compareLedger(t *testing.T, p *pacedFleet, run ledgerRun, truth sim.GroundTruth, steps []step.Record, kind vllm.Engine) map[step.State]bool {
	t.Helper()
	simulated := map[step.State]bool{}
	// The run's keys in simulated time.
	key := func(m map[string]float64, name string) (time.Duration, bool) {
		v, ok := m[vllm.Value{Name: name, Kind: kind}.Key("vllm")]
		return p.sim(time.Duration(v * float64(time.Second))), ok
	}
	type sums struct {
		want, tol [step.NumStates + 1]time.Duration
	}
	fleet := make([]sums, len(steps))
	for _, e := range truth.Engines {
		tol := ledgerTolerance(p, run, truth, e.Server, e.Engine, kind)
		for k, rec := range steps {
			w := ledgerWorkerOf(rec, p.urls[e.Server], e.Engine)
			if w == nil {
				t.Errorf("step %d: no per_worker record of engine %d of %s", rec.Step, e.Engine, p.urls[e.Server])
				continue
			}
			// SGLang's undetermined time (a page that repeated its previous log point) is
			// generating or idle, which the simulator tells apart: it may be off from either
			// by as much, and is itself allowed no more than their changes' spans.
			if kind == vllm.SGLang {
				u, _ := key(w.Metrics, step.StateKey(step.Undetermined))
				tol[k][step.Undetermined] = tol[k][step.Generating] + tol[k][step.Idle]
				tol[k][step.Generating] += u
				tol[k][step.Idle] += u
			} else if _, ok := key(w.Metrics, step.StateKey(step.Undetermined)); ok {
				t.Errorf("step %d, engine %d of server %d: a vLLM engine has undetermined time", rec.Step, e.Engine, e.Server)
			}
			var want [step.NumStates + 1]time.Duration
			for s := range step.Unreachable { // the simulator's states are the ledger's, in its order; its fleet is always reachable
				want[s] = e.Steps[k].Time[sim.State(s)]
				want[step.NumStates] += want[s]
			}
			line := fmt.Sprintf("step %d, engine %d of server %d (run/simulator±tolerance):", rec.Step, e.Engine, e.Server)
			for s := range step.NumStates + 1 {
				name := step.NameEngineTime
				if s < step.NumStates {
					name = step.StateKey(s)
				}
				got, ok := key(w.Metrics, name)
				switch {
				case s == step.Undetermined && kind != vllm.SGLang:
					continue // checked absent above
				case !ok:
					t.Errorf("step %d, engine %d of server %d: no key %s", rec.Step, e.Engine, e.Server, name)
				case (got - want[s]).Abs() > tol[k][s]:
					t.Errorf("step %d, engine %d of server %d: %s %v simulated, the simulator's %v: off by %v, more than the %v its scrapes allow",
						rec.Step, e.Engine, e.Server, name, got, want[s], (got - want[s]).Abs(), tol[k][s])
				}
				if s < step.NumStates && want[s] > 0 {
					simulated[s] = true
				}
				if got > 0 || want[s] > 0 {
					line += fmt.Sprintf(" %s %.2f/%.2f±%.2f", name, got.Seconds(), want[s].Seconds(), tol[k][s].Seconds())
				}
				fleet[k].want[s] += want[s]
				fleet[k].tol[s] += tol[k][s]
			}
			t.Log(line)
		}
	}
	for k, rec := range steps {
		for s := range step.NumStates + 1 {
			name := step.NameEngineTime
			if s < step.NumStates {
				name = step.StateKey(s)
			}
			if s == step.Undetermined && kind != vllm.SGLang {
				continue
			}
			if got, _ := key(rec.Metrics, name); (got - fleet[k].want[s]).Abs() > fleet[k].tol[s] {
				t.Errorf("step %d: the fleet's %s %v simulated, the simulator's %v, off by more than %v",
					rec.Step, name, got, fleet[k].want[s], fleet[k].tol[s])
			}
		}
	}
	return simulated
}

// ledgerWorkerOf returns the per_worker record of engine i of target (vLLM's engine label, SGLang's
// dp_rank), nil if none.
func ledgerWorkerOf(rec step.Record, target string, i int) *step.WorkerRecord {
	for j := range rec.PerWorker {
		w := &rec.PerWorker[j]
		if w.Target == target && (w.Engine == strconv.Itoa(i) || w.Engine == "" && w.Labels["dp_rank"] == strconv.Itoa(i)) {
			return w
		}
	}
	return nil
}
