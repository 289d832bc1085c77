package step

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
)

// TestPhaseCountersAddUp drives random scrapes, phase edges and step ends, and checks every
// step's and phase's counts against sums kept here: each scrape's increase belongs to the step
// it is observed in and to the phase open then, so Σ phases + outside = step, exactly.
func TestPhaseCountersAddUp(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		tr := NewTracker(Options{Scalars: true})
		tr.Begin(at(0))
		var gen float64
		type sums struct {
			step, outside float64
			phases        map[string]float64
			runs          map[string]int
		}
		cur := sums{phases: map[string]float64{}, runs: map[string]int{}}
		open := ""
		first := true
		var n int64
		ts := 0.0
		for i := range 200 {
			ts += 0.25
			switch r := rng.IntN(20); {
			case r < 2: // a phase starts (maybe the open one)
				name := []string{"rollout", "eval"}[rng.IntN(2)]
				tr.StartPhase(name, at(ts))
				if name != open {
					cur.runs[name]++
				}
				open = name
			case r < 3 && open != "":
				if !tr.EndPhase(open, at(ts)) {
					t.Fatalf("seed %d event %d: EndPhase(%q) of the open phase refused", seed, i, open)
				}
				open = ""
			case r < 4:
				if tr.EndPhase("nothing_open", at(ts)) {
					t.Fatalf("EndPhase of a phase that is not open did something")
				}
			case r < 6:
				n++
				rec := tr.EndStep(n, at(ts))
				check(t, fmt.Sprintf("seed %d step %d", seed, n), &rec, cur.step, cur.outside, cur.phases, cur.runs)
				cur = sums{phases: map[string]float64{}, runs: map[string]int{}}
				if open != "" {
					cur.runs[open] = 1
				}
			default:
				d := float64(rng.IntN(1000))
				gen += d
				tr.Observe(at(ts), target, mustPage(t, eng{engine: "0", gen: gen, running: 1}), nil)
				if first { // the baseline
					first = false
					continue
				}
				cur.step += d
				if open != "" {
					cur.phases[open] += d
				} else {
					cur.outside += d
				}
			}
		}
	}
}

func check(t *testing.T, what string, r *Record, step, outside float64, phases map[string]float64, runs map[string]int) {
	t.Helper()
	key := "vllm/generation_tokens"
	if got := r.Metrics[key]; got != step {
		t.Fatalf("%s: step %s = %v, want %v", what, key, got, step)
	}
	sum := 0.0
	for name, ph := range r.Phases {
		sum += ph.Metrics[key]
		if got := ph.Metrics[key]; got != phases[name] {
			t.Fatalf("%s: phase %s %s = %v, want %v", what, name, key, got, phases[name])
		}
		if ph.Intervals != runs[name] {
			t.Fatalf("%s: phase %s intervals = %d, want %d", what, name, ph.Intervals, runs[name])
		}
		if ph.DurationS > r.DurationS+1e-9 {
			t.Fatalf("%s: phase %s lasts %vs, longer than its step's %vs", what, name, ph.DurationS, r.DurationS)
		}
	}
	for name := range runs {
		if r.Phases[name] == nil {
			t.Fatalf("%s: phase %s ran but is not in the record", what, name)
		}
	}
	if sum+outside != step {
		t.Fatalf("%s: Σ phases %v + outside %v != step %v", what, sum, outside, step)
	}
}

// TestPhaseFigures checks a phase's duration over two runs, its rate over its own time, its
// gauge statistics over its own samples, and a phase that spans a step end.
func TestPhaseFigures(t *testing.T) {
	tr := NewTracker(Options{Scalars: true})
	tr.Begin(at(0))
	obs := func(ts, gen, running float64) {
		tr.Observe(at(ts), target, mustPage(t, eng{engine: "0", gen: gen, running: running}), nil)
	}
	obs(0.1, 0, 0)
	tr.StartPhase("rollout", at(1))
	obs(2, 100, 10) // 100 tokens in the rollout
	tr.EndPhase("rollout", at(3))
	obs(4, 100, 0) // training: nothing generated, nobody running
	tr.StartPhase("rollout", at(5))
	obs(6, 300, 30)
	rec := tr.EndStep(1, at(7)) // the rollout is open: it ends here and reopens
	ph := rec.Phases["rollout"]
	if ph == nil {
		t.Fatalf("no rollout phase in %+v", rec)
	}
	if ph.DurationS != 4 || ph.Intervals != 2 {
		t.Errorf("rollout: %vs in %d runs, want 4s in 2", ph.DurationS, ph.Intervals)
	}
	want(t, ph.Metrics, "vllm/generation_tokens", 300)
	want(t, ph.Metrics, "vllm/generation_tokens_per_s", 300.0/4)
	want(t, rec.Metrics, "vllm/generation_tokens_per_s", 300.0/7)
	want(t, ph.Metrics, "vllm/num_requests_running/mean", 20)
	want(t, rec.Metrics, "vllm/num_requests_running/mean", 10)
	obs(8, 400, 5)
	tr.EndPhase("rollout", at(9))
	obs(10, 450, 0)
	rec = tr.EndStep(2, at(11))
	ph = rec.Phases["rollout"]
	if ph == nil || ph.DurationS != 2 || ph.Intervals != 1 {
		t.Fatalf("step 2 rollout = %+v, want 2s in 1 run (from the step start)", ph)
	}
	want(t, ph.Metrics, "vllm/generation_tokens", 100)
	want(t, rec.Metrics, "vllm/generation_tokens", 150)
	rec = tr.EndStep(3, at(12))
	if rec.Phases != nil {
		t.Errorf("step 3 had no phase, got %v", rec.Phases)
	}
}

// TestBeginCountsEnginesStartedAfterTheRun: a worker first seen after the run started counts
// whole the series created after the run's start, in the step where it is first seen; one that
// ran before is a baseline; counts without _created are reported undated, once per target.
func TestBeginCountsEnginesStartedAfterTheRun(t *testing.T) {
	tr := NewTracker(Options{})
	tr.Begin(at(0))
	const late, before, undated = "http://late:8000/metrics", "http://before:8000/metrics", "http://undated:8000/metrics"
	// Each engine counted 4,000 tokens before its first scrape.
	if tr.Observe(at(1), late, mustPage(t, eng{engine: "0", gen: 4000, created: unix(0.2)}), nil) {
		t.Error("a page with _created reported undated")
	}
	tr.Observe(at(1.1), before, mustPage(t, eng{engine: "0", gen: 4000, created: unix(-10)}), nil)
	if !tr.Observe(at(1.2), undated, mustPage(t, eng{engine: "0", gen: 4000}), nil) {
		t.Error("a first page with counts and no _created not reported undated")
	}
	tr.Observe(at(2), late, mustPage(t, eng{engine: "0", gen: 4100, created: unix(0.2)}), nil)
	tr.Observe(at(2.1), before, mustPage(t, eng{engine: "0", gen: 4100, created: unix(-10)}), nil)
	if tr.Observe(at(2.2), undated, mustPage(t, eng{engine: "0", gen: 4100}), nil) {
		t.Error("undated reported twice for one target")
	}
	rec := tr.EndStep(1, at(3))
	if !rec.Start.Equal(at(0)) {
		t.Errorf("step 1 starts at %v, want the run's start %v", rec.Start, at(0))
	}
	want(t, rec.Metrics, "vllm/generation_tokens", 4100+100+100)
	// A worker first seen in step 2, created during step 1: counted whole in step 2.
	tr.Observe(at(4), "http://later:8000/metrics", mustPage(t, eng{engine: "0", gen: 700, created: unix(2.5)}), nil)
	rec = tr.EndStep(2, at(5))
	want(t, rec.Metrics, "vllm/generation_tokens", 700)
}

// TestWithoutBeginKeepsTheStepStartRule: a recording without a start event keeps the rule of
// earlier versions, so its replay is unchanged: a worker first seen in step 2 counts whole only
// what was created after step 2 started.
func TestWithoutBeginKeepsTheStepStartRule(t *testing.T) {
	tr := NewTracker(Options{})
	tr.Observe(at(0), target, mustPage(t, eng{engine: "0", gen: 10, created: unix(-5)}), nil)
	tr.EndStep(1, at(1))
	tr.Observe(at(2), "http://late:8000/metrics", mustPage(t, eng{engine: "0", gen: 700, created: unix(0.5)}), nil)
	rec := tr.EndStep(2, at(3))
	absent(t, rec.Metrics, "vllm/generation_tokens")
}

func TestValidPhase(t *testing.T) {
	for _, ok := range []string{"rollout", "eval", "a", "val_2", "x2345678901234567890123456789012"} {
		if err := ValidPhase(ok); err != nil {
			t.Errorf("ValidPhase(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Rollout", "2eval", "roll-out", "roll out", "x23456789012345678901234567890123", "kv_cache_usage_perc", "generation_tokens_per_s", "fleet_busy_s", "prefix_cache_hit_rate"} {
		if err := ValidPhase(bad); err == nil {
			t.Errorf("ValidPhase(%q) accepted", bad)
		}
	}
	if got := PhaseKey("vllm", "rollout", "vllm/prefix_cache_hit_rate"); got != "vllm/rollout/prefix_cache_hit_rate" {
		t.Errorf("PhaseKey = %q", got)
	}
	r := Record{Metrics: map[string]float64{"vllm/a": 1}, Phases: map[string]*Phase{"eval": {Metrics: map[string]float64{"vllm/a": 2}}}}
	if s := r.Scalars("vllm"); len(s) != 2 || s["vllm/a"] != 1 || s["vllm/eval/a"] != 2 {
		t.Errorf("Scalars = %v", s)
	}
}

// TestForgetTwiceKeepsTheLastAnswer: a target forgotten, added back, failing, and forgotten again
// before it answered still dates its engines from its last answer: an engine that restarted
// after that answer is counted from its restart when the target comes back.
func TestForgetTwiceKeepsTheLastAnswer(t *testing.T) {
	tr := NewTracker(Options{})
	tr.Begin(at(0))
	tr.Observe(at(1), target, mustPage(t, eng{engine: "0", gen: 10, created: unix(-5)}), nil)
	tr.Forget(target)
	tr.Observe(at(4), target, nil, errTest) // back, but not answering
	tr.Forget(target)
	tr.Observe(at(6), target, mustPage(t, eng{engine: "0", gen: 700, created: unix(2)}), nil) // restarted at 2
	rec := tr.EndStep(1, at(7))
	want(t, rec.Metrics, "vllm/generation_tokens", 700)
}

// TestPhaseRuns: a phase's runs in a step, in order, the one still open cut at the step's end
// and going on from the next step's start.
func TestPhaseRuns(t *testing.T) {
	tr := NewTracker(Options{})
	tr.Begin(at(0))
	tr.StartPhase("rollout", at(1))
	tr.StartPhase("eval", at(2)) // ends rollout
	tr.StartPhase("rollout", at(3))
	rec := tr.EndStep(1, at(4))
	if got, want := rec.Phases["rollout"].Runs, []Run{{at(1), at(2)}, {at(3), at(4)}}; !slices.Equal(got, want) {
		t.Errorf("step 1 rollout runs %v, want %v", got, want)
	}
	if got, want := rec.Phases["eval"].Runs, []Run{{at(2), at(3)}}; !slices.Equal(got, want) {
		t.Errorf("step 1 eval runs %v, want %v", got, want)
	}
	tr.EndPhase("rollout", at(5))
	rec = tr.EndStep(2, at(6))
	if got, want := rec.Phases["rollout"].Runs, []Run{{at(4), at(5)}}; !slices.Equal(got, want) || len(rec.Phases) != 1 {
		t.Errorf("step 2 rollout runs %v, want %v; phases %v", got, want, rec.Phases)
	}
}

// TestPublishesInTheRecord: a step's record lists the versions published in it, in order.
func TestPublishesInTheRecord(t *testing.T) {
	tr := NewTracker(Options{})
	tr.Begin(at(0))
	tr.Publish(1, at(1))
	tr.Publish(2, at(2))
	rec := tr.EndStep(1, at(2))
	if want := []Publish{{1, at(1)}, {2, at(2)}}; !slices.Equal(rec.Publishes, want) {
		t.Errorf("step 1 publishes %v, want %v", rec.Publishes, want)
	}
	tr.Publish(3, at(3))
	if rec = tr.EndStep(2, at(4)); !slices.Equal(rec.Publishes, []Publish{{3, at(3)}}) {
		t.Errorf("step 2 publishes %v, want version 3 at 3", rec.Publishes)
	}
	if rec = tr.EndStep(3, at(5)); rec.Publishes != nil {
		t.Errorf("step 3 publishes %v, want none", rec.Publishes)
	}
}

// TestRestartsInTheRecord: a step's record lists the restarts its scrapes showed, each with
// its worker and the scrape's time, and the next step's record does not list them again.
func TestRestartsInTheRecord(t *testing.T) {
	tr := NewTracker(Options{})
	tr.Begin(at(0))
	tr.Observe(at(1), "a", mustPage(t, eng{engine: "0", queries: 100, hits: 50}, eng{engine: "1", queries: 100, hits: 50}), nil)
	tr.Observe(at(2), "a", mustPage(t, eng{engine: "0", queries: 150, hits: 60}, eng{engine: "1", queries: 20, hits: 5}), nil)
	rec := tr.EndStep(1, at(3))
	if want := []Restart{{WorkerID{Target: "a", Engine: "1"}, at(2)}}; !slices.Equal(rec.Restarts, want) {
		t.Errorf("step 1 restarts %v, want %v", rec.Restarts, want)
	}
	tr.Observe(at(4), "a", mustPage(t, eng{engine: "0", queries: 160, hits: 60}, eng{engine: "1", queries: 30, hits: 5}), nil)
	if rec = tr.EndStep(2, at(5)); rec.Restarts != nil {
		t.Errorf("step 2 restarts %v, want none", rec.Restarts)
	}
}

// A step lists its first maxRestarts restarts and counts the others: a fleet restarting at
// once, or an engine whose counters fall at every scrape, must not grow the step without bound.
func TestRestartsListedUpToALimit(t *testing.T) {
	const n = maxRestarts + 3
	pageOf := func(queries float64) *page.Page {
		var es []eng
		for i := range n {
			es = append(es, eng{engine: strconv.Itoa(i), queries: queries, hits: 1})
		}
		return mustPage(t, es...)
	}
	tr := NewTracker(Options{})
	tr.Begin(at(0))
	tr.Observe(at(1), "a", pageOf(100), nil)
	tr.Observe(at(2), "a", pageOf(10), nil) // every engine restarted
	rec := tr.EndStep(1, at(3))
	if len(rec.Restarts) != maxRestarts || rec.RestartsUnlisted != n-maxRestarts {
		t.Errorf("%d restarts listed and %d not, want %d and %d", len(rec.Restarts), rec.RestartsUnlisted, maxRestarts, n-maxRestarts)
	}
	tr.Observe(at(4), "a", pageOf(5), nil)
	if rec = tr.EndStep(2, at(5)); len(rec.Restarts) != maxRestarts || rec.RestartsUnlisted != n-maxRestarts {
		t.Errorf("step 2: %d restarts listed and %d not, want the count to start again at each step", len(rec.Restarts), rec.RestartsUnlisted)
	}
}
