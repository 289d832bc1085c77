package step

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
)

// tev is one event of a fleet of several targets: a scrape of target (failed when fail), or a
// step end when end > 0.
type tev struct {
	ts     float64
	target string
	fail   bool
	es     []eng
	end    int64
}

func feed(t *testing.T, tr *Tracker, evs []tev) []Record {
	t.Helper()
	var out []Record
	for _, e := range evs {
		switch {
		case e.end > 0:
			out = append(out, tr.EndStep(e.end, at(e.ts)))
		case e.fail:
			tr.Observe(at(e.ts), e.target, nil, errTest)
		default:
			tr.Observe(at(e.ts), e.target, mustPage(t, e.es...), nil)
		}
	}
	return out
}

// busyScript is a worker's running and waiting requests at each of its scrapes.
type busyScript struct {
	target, engine   string
	running, waiting []float64
	// counters from the second scrape on (the first is the zero baseline)
	gen, queries, hits, preempt float64
}

// scriptEvents scrapes every target once a second, at 0, 1, …, with each worker's page built
// from its script, and ends step 1 at the last scrape.
func scriptEvents(ws []busyScript) []tev {
	n := len(ws[0].running)
	var evs []tev
	for i := range n {
		byTarget := map[string][]eng{}
		var targets []string
		for _, w := range ws {
			e := eng{engine: w.engine, running: w.running[i]}
			if w.waiting != nil {
				e.waiting = w.waiting[i]
			}
			if i > 0 {
				e.gen, e.queries, e.hits, e.preempt = w.gen, w.queries, w.hits, w.preempt
			}
			if _, ok := byTarget[w.target]; !ok {
				targets = append(targets, w.target)
			}
			byTarget[w.target] = append(byTarget[w.target], e)
		}
		for _, tg := range targets {
			evs = append(evs, tev{ts: float64(i), target: tg, es: byTarget[tg]})
		}
	}
	return append(evs, tev{ts: float64(n - 1), end: 1})
}

func workerMetrics(t *testing.T, r *Record, tg, engine string) map[string]float64 {
	t.Helper()
	for _, w := range r.PerWorker {
		if w.Target == tg && w.Engine == engine {
			return w.Metrics
		}
	}
	t.Fatalf("no per_worker record for %s #%s", tg, engine)
	return nil
}

// TestBalanceByHand: four workers scraped at 0…4 s. The scrape at 0 is each target's first and
// stands for no time; every later sample stands for the second before it.
//
//	a#0 running 5 5 3 0 0   busy (0,2]  idle (2,4]  last busy 2
//	b#0 running 5 5 5 5 0   busy (0,3]  idle (3,4]  last busy 3
//	c#0 waiting 2 2 1 0 0   busy (0,2]  idle (2,4]  last busy 2 (waiting alone is busy)
//	d#0 running 1 1 1 1 1   busy (0,4]              last busy 4
//
// Last busy 2, 3, 2, 4: fleet busy 4, median 2.5, tail 1.5; d is the one straggler (1.5 s past
// the median, more than the 1 s interval), b is not (0.5 s). Idle fractions 0.5, 0.25, 0.5, 0.
func TestBalanceByHand(t *testing.T) {
	ws := []busyScript{
		{target: "a", engine: "0", running: []float64{5, 5, 3, 0, 0}, gen: 100, queries: 100, hits: 50, preempt: 1},
		{target: "b", engine: "0", running: []float64{5, 5, 5, 5, 0}, gen: 200, queries: 100, hits: 80, preempt: 3},
		{target: "c", engine: "0", running: []float64{0, 0, 0, 0, 0}, waiting: []float64{2, 2, 1, 0, 0}, gen: 300, preempt: 3},
		{target: "d", engine: "0", running: []float64{1, 1, 1, 1, 1}, gen: 400, queries: 100, hits: 50},
	}
	r := feed(t, NewTracker(Options{PerWorker: true}), scriptEvents(ws))[0]
	m := r.Metrics
	want(t, m, "vllm/fleet_busy_s", 4)
	want(t, m, "vllm/straggler_tail_s", 1.5)
	want(t, m, "vllm/worker_idle_fraction/mean", (0.5+0.25+0.5+0)/4)
	want(t, m, "vllm/worker_idle_fraction/max", 0.5)
	want(t, m, "vllm/generation_tokens_imbalance", 400/250.0)
	// c has no queries; a and d tie at 0.5: the first in target order is named
	want(t, m, "vllm/prefix_cache_hit_rate/worst_worker", 0.5)
	// b and c tie at 3 preemptions
	want(t, m, "vllm/num_preemptions/worst_worker", 3)
	for _, k := range []string{"vllm/busy_s", "vllm/idle_s", "vllm/last_busy_s"} {
		absent(t, m, k) // per worker only
	}
	for _, w := range []struct {
		target           string
		busy, idle, last float64
	}{{"a", 2, 2, 2}, {"b", 3, 1, 3}, {"c", 2, 2, 2}, {"d", 4, 0, 4}} {
		pw := workerMetrics(t, &r, w.target, "0")
		want(t, pw, "vllm/busy_s", w.busy)
		want(t, pw, "vllm/idle_s", w.idle)
		want(t, pw, "vllm/last_busy_s", w.last)
		for _, k := range []string{"vllm/fleet_busy_s", "vllm/straggler_tail_s", "vllm/worker_idle_fraction/mean", "vllm/generation_tokens_imbalance"} {
			absent(t, pw, k) // fleet keys are not per worker
		}
	}
	wantStragglers := []Straggler{{Target: "d", Engine: "0", LastBusyS: 4}}
	if !reflect.DeepEqual(r.Stragglers, wantStragglers) {
		t.Errorf("stragglers %+v, want %+v", r.Stragglers, wantStragglers)
	}
	wantWorst := &WorstWorkers{
		PrefixCacheHitRate: &WorkerValue{Target: "a", Engine: "0", Value: 0.5},
		NumPreemptions:     &WorkerValue{Target: "b", Engine: "0", Value: 3},
	}
	if !reflect.DeepEqual(r.WorstWorkers, wantWorst) {
		t.Errorf("worst workers %+v %+v, want %+v %+v", r.WorstWorkers.PrefixCacheHitRate, r.WorstWorkers.NumPreemptions, wantWorst.PrefixCacheHitRate, wantWorst.NumPreemptions)
	}
	// The timeline carries the same activity.
	for i, w := range []Activity{{2, 2, 2}, {3, 1, 3}, {2, 2, 2}, {4, 0, 4}} {
		if got := r.Timeline.Workers[i].Activity; got == nil || *got != w {
			t.Errorf("timeline worker %d activity %+v, want %+v", i, got, w)
		}
	}
	// The new fields sit between metrics and per_worker.
	b, err := MarshalLine(&r)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	iM, iS, iW, iP := strings.Index(s, `"metrics":`), strings.Index(s, `"stragglers":[{"target":"d","engine":"0","last_busy_s":4}]`), strings.Index(s, `"worst_workers":{"prefix_cache_hit_rate":{"target":"a","engine":"0","value":0.5},"num_preemptions":{"target":"b","engine":"0","value":3}}`), strings.Index(s, `"per_worker":`)
	if !(iM >= 0 && iM < iS && iS < iW && iW < iP) {
		t.Errorf("record line lacks metrics, stragglers, worst_workers, per_worker in that order:\n%s", s)
	}
}

// TestBalanceWorkerDown: a's target fails at 2 and 3, so a's sample at 4 stands only for
// (3,4] and (1,3] is neither busy nor idle; b's page lacks engine 1 at 2, so its sample at 3
// stands for (2,3]; c never gets busy.
//
//	     running at 0  1  2  3  4  5  6
//	a#0           1  1  ✗  ✗  1  0  0   busy (0,1]+(3,4] = 2  idle (4,6] = 2  last busy 4
//	b#0           1  1  1  1  1  1  1   busy (0,6] = 6                      last busy 6
//	b#1           1  1  –  1  0  0  0   busy (0,1]+(2,3] = 2  idle (3,6] = 3  last busy 3
//	c#0           0  0  0  0  0  0  0   idle (0,6] = 6, no last busy
func TestBalanceWorkerDown(t *testing.T) {
	var evs []tev
	for i := range 7 {
		ts := float64(i)
		if i == 2 || i == 3 {
			evs = append(evs, tev{ts: ts, target: "a", fail: true})
		} else {
			evs = append(evs, tev{ts: ts, target: "a", es: []eng{{engine: "0", running: map[bool]float64{true: 1}[i <= 4]}}})
		}
		b := []eng{{engine: "0", running: 1}}
		if i != 2 {
			b = append(b, eng{engine: "1", running: map[bool]float64{true: 1}[i <= 3]})
		}
		evs = append(evs, tev{ts: ts, target: "b", es: b})
		evs = append(evs, tev{ts: ts, target: "c", es: []eng{{engine: "0"}}})
	}
	evs = append(evs, tev{ts: 6, end: 1})
	// the next step: a is down at its end, so its last sample (8) does not hold until the end (10)
	for i := 7; i <= 10; i++ {
		ts := float64(i)
		if i >= 9 {
			evs = append(evs, tev{ts: ts, target: "a", fail: true})
		} else {
			evs = append(evs, tev{ts: ts, target: "a", es: []eng{{engine: "0", running: 1}}})
		}
	}
	evs = append(evs, tev{ts: 10, end: 2})
	rs := feed(t, NewTracker(Options{PerWorker: true}), evs)
	r := rs[0]
	for _, w := range []struct {
		target, engine   string
		busy, idle, last float64
	}{{"a", "0", 2, 2, 4}, {"b", "0", 6, 0, 6}, {"b", "1", 2, 3, 3}, {"c", "0", 0, 6, -1}} {
		pw := workerMetrics(t, &r, w.target, w.engine)
		want(t, pw, "vllm/busy_s", w.busy)
		want(t, pw, "vllm/idle_s", w.idle)
		if w.last < 0 {
			absent(t, pw, "vllm/last_busy_s")
		} else {
			want(t, pw, "vllm/last_busy_s", w.last)
		}
	}
	m := r.Metrics
	// c, never busy, has no last busy and does not count in the median (of 4, 6, 3)
	want(t, m, "vllm/fleet_busy_s", 6)
	want(t, m, "vllm/straggler_tail_s", 6-4)
	// idle fractions over each worker's covered time: 2/4, 0, 3/5, 1
	want(t, m, "vllm/worker_idle_fraction/mean", (0.5+0+0.6+1)/4)
	want(t, m, "vllm/worker_idle_fraction/max", 1)
	if len(r.Stragglers) != 1 || r.Stragglers[0].Target != "b" || r.Stragglers[0].Engine != "0" {
		t.Errorf("stragglers %+v, want b#0 alone (2 s past the median of 4)", r.Stragglers)
	}
	if a := r.Timeline.Workers[3].Activity; a == nil || *a != (Activity{IdleS: 6}) {
		t.Errorf("c's timeline activity %+v, want idle 6 and nothing else", a)
	}
	// Step 2 (6 to 10): a's scrape at 7 stands for (6,7], the one at 8 for (7,8]; then it is down.
	want(t, workerMetrics(t, &rs[1], "a", "0"), "vllm/busy_s", 2)
	want(t, workerMetrics(t, &rs[1], "a", "0"), "vllm/last_busy_s", 2)
}

// TestBalanceSingleWorker: one worker has a fleet busy time and an idle fraction but nothing
// to compare with: no tail, imbalance, worst worker or straggler, and the record line has
// neither new field.
func TestBalanceSingleWorker(t *testing.T) {
	ws := []busyScript{{target: "a", engine: "0", running: []float64{1, 1, 0}, gen: 100, queries: 10, hits: 5, preempt: 2}}
	for _, perWorker := range []bool{false, true} {
		r := feed(t, NewTracker(Options{PerWorker: perWorker}), scriptEvents(ws))[0]
		want(t, r.Metrics, "vllm/fleet_busy_s", 1)
		want(t, r.Metrics, "vllm/worker_idle_fraction/mean", 0.5)
		want(t, r.Metrics, "vllm/worker_idle_fraction/max", 0.5)
		for _, k := range []string{"vllm/straggler_tail_s", "vllm/generation_tokens_imbalance", "vllm/prefix_cache_hit_rate/worst_worker", "vllm/num_preemptions/worst_worker"} {
			absent(t, r.Metrics, k)
		}
		if r.Stragglers != nil || r.WorstWorkers != nil {
			t.Errorf("stragglers %+v worst %+v, want none", r.Stragglers, r.WorstWorkers)
		}
		b, err := MarshalLine(&r)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "stragglers") || strings.Contains(string(b), "worst_workers") {
			t.Errorf("record line has a balance field:\n%s", b)
		}
		if perWorker {
			want(t, r.PerWorker[0].Metrics, "vllm/last_busy_s", 1)
		} else if r.PerWorker != nil {
			t.Errorf("per_worker without the option: %+v", r.PerWorker)
		}
	}
}

// TestBalanceNoBasis: keys without a basis are absent, never a made-up value.
func TestBalanceNoBasis(t *testing.T) {
	// Two workers, never busy, no tokens, no queries, no preemptions.
	ws := []busyScript{
		{target: "a", engine: "0", running: []float64{0, 0, 0}},
		{target: "a", engine: "1", running: []float64{0, 0, 0}},
	}
	r := feed(t, NewTracker(Options{PerWorker: true}), scriptEvents(ws))[0]
	for _, k := range []string{"vllm/fleet_busy_s", "vllm/straggler_tail_s", "vllm/generation_tokens_imbalance", "vllm/prefix_cache_hit_rate/worst_worker"} {
		absent(t, r.Metrics, k)
	}
	want(t, r.Metrics, "vllm/worker_idle_fraction/max", 1)
	// nobody preempted: the most on one worker is 0, but no worker is named for it
	want(t, r.Metrics, "vllm/num_preemptions/worst_worker", 0)
	if r.WorstWorkers != nil || r.Stragglers != nil {
		t.Errorf("worst %+v stragglers %+v, want none", r.WorstWorkers, r.Stragglers)
	}
	absent(t, r.PerWorker[0].Metrics, "vllm/last_busy_s")
	want(t, r.PerWorker[0].Metrics, "vllm/busy_s", 0)

	// A step of one scrape: every sample is a first one and stands for no time.
	tr := NewTracker(Options{PerWorker: true})
	tr.Observe(at(0), "a", mustPage(t, eng{engine: "0", running: 3}, eng{engine: "1", running: 1}), nil)
	r = tr.EndStep(1, at(1))
	for _, k := range []string{"vllm/fleet_busy_s", "vllm/worker_idle_fraction/mean", "vllm/worker_idle_fraction/max"} {
		absent(t, r.Metrics, k)
	}
	absent(t, r.PerWorker[0].Metrics, "vllm/busy_s")
	if r.Timeline.Workers[0].Activity != nil {
		t.Errorf("activity %+v from a sample that stands for no time", r.Timeline.Workers[0].Activity)
	}
}

// TestStragglersTiesAndLimit: eight engines on one target, so their last-busy offsets tie. Four
// are busy until 1, three until 5, one until 6: the median is 3, four workers are more than one
// interval past it, and the list keeps the three latest, ties in engine order.
func TestStragglersTiesAndLimit(t *testing.T) {
	var ws []busyScript
	for e, until := range []int{1, 1, 1, 5, 1, 5, 6, 5} {
		run := make([]float64, 8)
		for i := range run {
			if i <= until {
				run[i] = 1
			}
		}
		ws = append(ws, busyScript{target: "a", engine: string(rune('0' + e)), running: run})
	}
	r := feed(t, NewTracker(Options{Prefix: "rollout"}), scriptEvents(ws))[0]
	want(t, r.Metrics, "rollout/fleet_busy_s", 6)
	want(t, r.Metrics, "rollout/straggler_tail_s", 3)
	got := make([]string, len(r.Stragglers))
	for i, s := range r.Stragglers {
		got[i] = fmt.Sprintf("%s@%g", s.Engine, s.LastBusyS)
	}
	if w := []string{"6@6", "3@5", "5@5"}; !reflect.DeepEqual(got, w) {
		t.Errorf("stragglers %v, want %v", got, w)
	}
	for k := range r.Metrics {
		if !strings.HasPrefix(k, "rollout/") {
			t.Errorf("key %q lacks the prefix", k)
		}
	}
}

// TestBalanceForgottenTarget: a target removed and added back mid-step starts over: its first
// scrape back stands for no time, so the time it was out is not covered.
func TestBalanceForgottenTarget(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true})
	p := mustPage(t, eng{engine: "0", running: 1})
	tr.Observe(at(0), "a", p, nil)
	tr.Observe(at(1), "a", p, nil)
	tr.Forget("a")
	tr.Observe(at(5), "a", p, nil)
	tr.Observe(at(6), "a", p, nil)
	r := tr.EndStep(1, at(6))
	want(t, r.PerWorker[0].Metrics, "vllm/busy_s", 2)
	want(t, r.PerWorker[0].Metrics, "vllm/last_busy_s", 6)
}

// TestWorstWorkersNameWorkerLabels: the Ray replicas differ only by their worker labels, which
// name the worst one.
func TestWorstWorkersNameWorkerLabels(t *testing.T) {
	r := rayStep(t, nil)
	w := r.WorstWorkers
	if w == nil || w.PrefixCacheHitRate == nil || w.NumPreemptions == nil {
		t.Fatalf("worst workers %+v, want both", w)
	}
	second := map[string]string{"ReplicaId": "p3xw9c4e", "WorkerId": "a2e4c6b8d0f1a3c5e7b9d2f4a6c8e0b1d3f5a7c9e2b4d6f8a0c1e3b5"}
	// hit rates 2048/4096 and 1024/8192; preemptions 1 and 4
	if got := w.PrefixCacheHitRate; !maps.Equal(got.Labels, second) || got.Value != 0.125 || got.Engine != "0" {
		t.Errorf("worst hit rate %+v, want the second replica at 0.125", got)
	}
	if got := w.NumPreemptions; !maps.Equal(got.Labels, second) || got.Value != 4 {
		t.Errorf("most preemptions %+v, want the second replica with 4", got)
	}
	want(t, r.Metrics, "vllm/generation_tokens_imbalance", 2500/2000.0)
}

// TestStragglerThresholdIsExclusive: a worker exactly one scrape interval after the median is
// not a straggler (it may have finished right after the median worker's next sample), though
// the fleet waited that interval for it: last busy 2, 2, 3 with 1 s scrapes give a tail of 1
// and no straggler.
func TestStragglerThresholdIsExclusive(t *testing.T) {
	ws := []busyScript{
		{target: "a", engine: "0", running: []float64{1, 1, 1, 0, 0}, gen: 1},
		{target: "b", engine: "0", running: []float64{1, 1, 1, 0, 0}, gen: 1},
		{target: "c", engine: "0", running: []float64{1, 1, 1, 1, 0}, gen: 1},
	}
	recs := feed(t, NewTracker(Options{}), scriptEvents(ws))
	r := recs[0]
	want(t, r.Metrics, "vllm/straggler_tail_s", 1)
	if len(r.Stragglers) != 0 {
		t.Fatalf("stragglers %+v: a worker one interval after the median is not one", r.Stragglers)
	}
}
