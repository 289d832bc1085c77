package step

import (
	"slices"
	"sync"
	"time"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// A step ends (EndStep) or is looked at while open (Peek) by building its Record: the step's
// and each phase's figures over the workers' shares, fleet-wide per engine kind, per worker
// and in timelines. EndStep then opens the next step. fill gathers the keys: those metrics
// computes (metrics.go says where each family is), then the time ledger's (ledger.go), the
// compute keys (compute.go), the balance keys (balance.go) and the policy versions (policy.go).

// EndStep closes the open step as step n at ts (after the boundary scrape has been observed)
// and opens the next one. A phase open at ts ends with the step and opens again in the next.
// The workers that departed in the step are forgotten (see forgetDeparted) and named in the
// record's Forgotten.
func (t *Tracker) EndStep(n int64, ts time.Time) Record {
	if !t.started {
		t.started, t.start = true, ts
	}
	r := t.build(n, t.start, ts)
	// The step's publishes: after its start, up to its end (the latest are at the list's end).
	for i := len(t.pol.pubs) - 1; i >= 0 && t.pol.pubs[i].at.After(t.start); i-- {
		if p := t.pol.pubs[i]; !p.at.After(ts) {
			r.Publishes = append(r.Publishes, Publish{p.v, p.at})
		}
	}
	slices.Reverse(r.Publishes)
	r.RatiosOver = t.ratiosOver(t.open)
	r.NegativeBounds = t.negativeBounds(t.open)
	r.Forgotten = t.forgetDeparted()
	r.Restarts, t.restarts = t.restarts, nil
	r.RestartsUnlisted, t.restartsUnlisted = t.restartsUnlisted, 0
	t.seq++
	t.labels.stepEnded()
	t.start, t.now = ts, ts
	t.open = newAcc()
	t.pol.lags = [vllm.NumEngines][]float64{}
	t.phases = map[string]*phaseAcc{}
	if t.phase != "" {
		t.phases[t.phase] = &phaseAcc{acc: newAcc(), first: ts, since: ts, intervals: 1}
	}
	for _, tgt := range t.targets {
		tgt.stepWorkers, tgt.stepTokenizers = 0, 0
		for i := range tgt.engines {
			tgt.engines[i].wa = nil
		}
	}
	return r
}

// Peek returns what the open step would be if it ended at ts, without closing it.
func (t *Tracker) Peek(ts time.Time) Record {
	if !t.started {
		return t.build(0, ts, ts)
	}
	return t.build(0, t.start, ts)
}

func (t *Tracker) build(n int64, start, end time.Time) Record {
	r := Record{
		Step:      n,
		Start:     start,
		End:       end,
		DurationS: end.Sub(start).Seconds(),
	}
	if !t.opt.NoTimeline {
		r.Timeline = &Timeline{Start: start}
	}
	// The phases' figures are computed beside the step's: fill only reads the tracker, and a
	// fleet's step end, which the trainer waits for, spent a third of its close on them.
	phases := make(map[string]*Phase, len(t.phases))
	var wg sync.WaitGroup
	for name, pa := range t.phases {
		d, runs := pa.dur, slices.Clip(pa.runs)
		if name == t.phase {
			d += end.Sub(pa.since)
			runs = append(runs, Run{pa.since, end})
		}
		ph := &Phase{DurationS: d.Seconds(), Intervals: pa.intervals, Runs: runs}
		phases[name] = ph
		wg.Go(func() {
			pr := Record{DurationS: ph.DurationS}
			t.fill(&pr, pa.acc, pa.first, pr.DurationS, false)
			ph.Metrics, ph.Values = vllm.Flat(t.opt.Prefix, pr.Values), pr.Values
		})
	}
	t.fill(&r, t.open, start, r.DurationS, t.opt.PerWorker)
	wg.Wait()
	if len(phases) > 0 {
		r.Phases = phases
	}
	r.flatten(t.opt.Prefix)
	return r
}

// fill computes r's scrapes, workers and values from a (the open step's, or a phase's) over
// durS seconds; balance figures count from start. It adds per-worker records when perWorker is
// set, and timelines when r has one. The fleet's values and balance are computed per engine
// kind, over the workers of that kind, and keyed under its prefix.
func (t *Tracker) fill(r *Record, a *acc, start time.Time, durS float64, perWorker bool) {
	r.Scrapes = Scrapes{OK: a.ok, Failed: a.failed}
	ids := make([]WorkerID, 0, len(a.workers))
	for id, wa := range a.workers {
		if wa.scrapes > 0 {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, WorkerID.Compare)
	was := make([]*workerAcc, len(ids))
	for i, id := range ids {
		was[i] = a.workers[id]
		if !was[i].tokenizer {
			r.Workers++
		}
	}
	pools := poolsByKind(was)
	for _, p := range pools {
		r.Values = append(r.Values, p.tag(t.metrics(p.of(was), durS))...)
	}
	// The ledger's engines are the step's workers and those whose targets failed every scrape
	// of it: their unreachable time is the fleet's, though they have no per_worker record (it
	// lists the workers that answered).
	var down []*workerAcc
	for _, wa := range a.workers {
		if wa.scrapes == 0 && wa.led.engine() > 0 {
			down = append(down, wa)
		}
	}
	led := was
	if len(down) > 0 {
		led = append(slices.Clone(was), down...)
	}
	for _, p := range poolsByKind(led) {
		r.Values = append(r.Values, p.tag(ledgerValues(p.of(led)))...)
	}
	for _, p := range pools {
		r.Values = append(r.Values, p.tag(computeValues(p.of(was), durS, t.opt.Peak))...)
	}
	for i, id := range ids {
		if perWorker {
			vs := append(t.metrics(was[i:i+1], durS), ledgerValues(was[i:i+1])...)
			vs = append(vs, computeValues(was[i:i+1], durS, t.opt.Peak)...)
			r.PerWorker = append(r.PerWorker, WorkerRecord{Target: id.Target, Engine: id.Engine, Labels: id.LabelMap(),
				Values: kindPool{kind: was[i].kind}.tag(vs), TargetLabels: t.labels.of(id.Target)})
		}
		if r.Timeline != nil {
			r.Timeline.Workers = append(r.Timeline.Workers, timeline(id, was[i]))
		}
	}
	for _, p := range pools {
		t.balance(r, ids, was, p, start, perWorker)
		if a == t.open {
			t.policyKeys(r, ids, was, p, perWorker)
		}
	}
	if len(pools) == 0 && a == t.open && t.pol.latest.ok {
		// no engine in the step: the trainer's version alone, under the run's own prefix
		r.Values = append(r.Values, vllm.Value{Name: NamePolicyVersion, V: float64(t.pol.latest.n)})
	}
}
