package step

import (
	"cmp"
	"slices"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// A worker's activity in a step comes from its samples of num_requests_running and
// num_requests_waiting: a sample is busy when their sum is above 0 (a page with only one of them
// uses that one), idle otherwise. As in the timelines, a sample stands for the time since the
// previous scrape of its target, clipped to the step start; so the span from the step start to
// a worker's first sample of the step is covered by that sample. Time that no sample stands for
// is neither busy nor idle:
//   - a target's first scrape (of the run, or since Forget) stands for no time: nothing is
//     known about the worker before it;
//   - after a failed scrape of the target, or a page without the worker, the next sample stands
//     only for the time since that scrape: a worker down for part of the step is not covered
//     while it is down, and its last sample does not hold over the gap;
//   - a sample without either gauge (both absent or not finite) stands for no time;
//   - a sample of an engine asleep (vLLM's engine_sleep_state says it sleeps) is asleep, neither
//     busy nor idle: worker_asleep_fraction is the asleep share of the time a worker's samples
//     stood for, for the workers whose pages have the family;
//   - the time after the worker's last sample is not covered (the boundary scrape taken just
//     before the step end is normally that last sample).
//
// The resolution of every figure is the scrape interval.
//
// These figures predate the time ledger (ledger.go) and keep their values; they are views of
// it. Per worker, on pages whose every sample has num_requests_running and no state family but
// engine_sleep_state: asleep_s = time/asleep_s, busy_s + idle_s = time/generating_s +
// time/idle_s, and busy_s - time/generating_s is the time of the samples with requests waiting
// and none running (busy here, idle in the ledger). A failed scrape's span is unreachable in the
// ledger and in none of these.

// maxStragglers bounds the stragglers a record names.
const maxStragglers = 3

// Activity is one worker's busy and idle time in a step, in seconds.
type Activity struct {
	BusyS, IdleS float64
	// LastBusyS is the end of the worker's last busy sample's span (that sample's offset from
	// the step start); meaningful only when BusyS > 0.
	LastBusyS float64
}

// Straggler names a worker whose last busy sample came well after most of the fleet's; see
// Tracker.balance.
type Straggler struct {
	Target    string            `json:"target"`
	Engine    string            `json:"engine"`
	Labels    map[string]string `json:"labels,omitempty"`
	LastBusyS float64           `json:"last_busy_s"`
}

// ID is the straggler's worker.
func (s Straggler) ID() WorkerID {
	return WorkerID{Target: s.Target, Engine: s.Engine, Labels: page.LabelKey(s.Labels)}
}

// WorstWorkers names the workers behind the record's …/worst_worker keys.
type WorstWorkers struct {
	PrefixCacheHitRate *WorkerValue `json:"prefix_cache_hit_rate,omitempty"`
	NumPreemptions     *WorkerValue `json:"num_preemptions,omitempty"`
}

// WorkerValue is one worker's value of a step key.
type WorkerValue struct {
	Target string            `json:"target"`
	Engine string            `json:"engine"`
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
}

// ID is the worker the value belongs to.
func (v WorkerValue) ID() WorkerID {
	return WorkerID{Target: v.Target, Engine: v.Engine, Labels: page.LabelKey(v.Labels)}
}

// activity accumulates a worker's busy, idle and asleep time in the open step.
type activity struct {
	busy, idle time.Duration
	asleep     time.Duration
	sleeps     bool      // its pages have the sleep-state family
	lastBusy   time.Time // end of the last busy span
	spans      ints      // every covered span in nanoseconds, for the step's resolution
}

// add counts a sample of ep taken at ts that stands for the time since from (zero when the
// sample stands for no time). A sample of an engine asleep (its page has the sleep-state family,
// slept) is asleep, neither busy nor idle.
func (a *activity) add(from, ts time.Time, ep *page.EnginePage, sleeps, asleep bool) {
	a.sleeps = a.sleeps || sleeps
	if from.IsZero() || !ts.After(from) {
		return
	}
	d := ts.Sub(from)
	if asleep {
		a.spans.add(int64(d))
		a.asleep += d
		return
	}
	if !ep.HasGauge[vllm.Running] && !ep.HasGauge[vllm.Waiting] {
		return
	}
	a.spans.add(int64(d))
	if ep.Gauges[vllm.Running]+ep.Gauges[vllm.Waiting] > 0 {
		a.busy += d
		a.lastBusy = ts
	} else {
		a.idle += d
	}
}

func (a *activity) covered() bool { return a.busy+a.idle > 0 }

// spanStart is the time a sample of target taken now stands for since: the target's previous
// scrape, clipped to the step start, or zero for its first scrape.
func spanStart(prev time.Time, seen bool, stepStart time.Time) time.Time {
	if !seen {
		return time.Time{}
	}
	if prev.Before(stepStart) {
		return stepStart
	}
	return prev
}

// balance adds the fleet-balance values of the workers of pool p to r.Values, each of their
// activity values to its per_worker record and timeline, and names their stragglers and worst
// workers. ids and was are the step's workers, sorted, aligned with r.PerWorker (when present)
// and r.Timeline.Workers.
func (t *Tracker) balance(r *Record, ids []WorkerID, was []*workerAcc, p kindPool, start time.Time, perWorker bool) {
	add := func(vs *[]vllm.Value, name, stat string, v float64) {
		*vs = append(*vs, vllm.Value{Name: name, Stat: stat, V: v, Kind: p.kind})
	}
	type last struct {
		i int
		s float64
	}
	var lasts []last
	var spans []float64 // seconds
	var idleSum, idleMax float64
	var asleepSum, asleepMax float64
	covered, sleepers := 0, 0
	stragglers := 0
	p.each(len(was), func(i int) {
		if was[i].tokenizer {
			return // no engine: it schedules nothing
		}
		a := &was[i].act
		if a.sleeps && a.busy+a.idle+a.asleep > 0 {
			frac := a.asleep.Seconds() / (a.busy + a.idle + a.asleep).Seconds()
			asleepSum += frac
			asleepMax = max(asleepMax, frac)
			sleepers++
			if perWorker {
				add(&r.PerWorker[i].Values, "asleep_s", "", a.asleep.Seconds())
			}
		}
		if !a.covered() {
			return
		}
		a.spans.each(func(d int64) { spans = append(spans, time.Duration(d).Seconds()) })
		act := &Activity{BusyS: a.busy.Seconds(), IdleS: a.idle.Seconds()}
		frac := act.IdleS / (act.BusyS + act.IdleS)
		idleSum += frac
		idleMax = max(idleMax, frac)
		covered++
		var pw *[]vllm.Value
		if perWorker {
			pw = &r.PerWorker[i].Values
			add(pw, "busy_s", "", act.BusyS)
			add(pw, "idle_s", "", act.IdleS)
		}
		if a.busy > 0 {
			act.LastBusyS = a.lastBusy.Sub(start).Seconds()
			lasts = append(lasts, last{i, act.LastBusyS})
			if pw != nil {
				add(pw, "last_busy_s", "", act.LastBusyS)
			}
		}
		if r.Timeline != nil {
			r.Timeline.Workers[i].Activity = act
		}
	})
	if covered > 0 {
		add(&r.Values, NameWorkerIdle, vllm.StatMean, idleSum/float64(covered))
		add(&r.Values, NameWorkerIdle, vllm.StatMax, idleMax)
	}
	if sleepers > 0 {
		add(&r.Values, NameWorkerAsleep, vllm.StatMean, asleepSum/float64(sleepers))
		add(&r.Values, NameWorkerAsleep, vllm.StatMax, asleepMax)
	}
	if len(lasts) > 0 {
		xs := make([]float64, len(lasts))
		for j, l := range lasts {
			xs[j] = l.s
		}
		fleet := slices.Max(xs)
		add(&r.Values, NameFleetBusy, "", fleet)
		if len(lasts) >= 2 {
			median, _ := Percentile(xs, 0.5)
			add(&r.Values, NameStragglerTail, "", fleet-median)
			// A worker is a straggler when its last busy sample came more than one scrape
			// interval after the median: then it was still busy after the median worker's next
			// sample had seen it idle. The interval is the median span the step's samples
			// stood for, so that replay needs no configuration to give the same list.
			res, _ := Percentile(spans, 0.5)
			slices.SortFunc(lasts, func(a, b last) int { return cmp.Or(cmp.Compare(b.s, a.s), ids[a.i].Compare(ids[b.i])) })
			for _, l := range lasts {
				if l.s-median <= res || stragglers == maxStragglers {
					break
				}
				stragglers++
				id := ids[l.i]
				r.Stragglers = append(r.Stragglers, Straggler{Target: id.Target, Engine: id.Engine, Labels: id.LabelMap(), LastBusyS: l.s})
			}
		}
	}
	t.worstWorkers(r, ids, was, p)
}

// Names of the fleet-balance figures (keys without prefix): the span the fleet was busy, how
// far the last worker trailed the median one, and the workers' idle fraction (with mean and
// max statistics).
const (
	NameFleetBusy     = "fleet_busy_s"
	NameStragglerTail = "straggler_tail_s"
	NameWorkerIdle    = "worker_idle_fraction"
	NameWorkerAsleep  = "worker_asleep_fraction"
)

// The fleet-balance keys (without prefix) that compare workers by a family.
var (
	KeyImbalance        = vllm.Counters[vllm.GenerationTokens].Name + "_imbalance"
	KeyWorstHitRate     = vllm.PrefixHitRate.Name + "/" + vllm.WorstWorker
	KeyWorstPreemptions = vllm.Counters[vllm.Preemptions].Name + "/" + vllm.WorstWorker
)

// worstWorkers adds the keys that compare the counters of pool p's workers: the
// generation-token imbalance, the lowest hit rate (the engine's, vllm.EngineSpec.HitRate) and
// the most preemptions. Each needs two workers with a basis for it, and none whose value went
// beyond the float limit: the comparison would leave that worker out.
func (t *Tracker) worstWorkers(r *Record, ids []WorkerID, was []*workerAcc, p kindPool) {
	add := func(name, stat string, v float64) {
		r.Values = append(r.Values, vllm.Value{Name: name, Stat: stat, V: v, Kind: p.kind})
	}
	hitRate := *vllm.Engines[p.kind].HitRate
	value := func(i int, v float64) *WorkerValue {
		return &WorkerValue{Target: ids[i].Target, Engine: ids[i].Engine, Labels: ids[i].LabelMap(), Value: v}
	}
	var worst WorstWorkers
	var gen []float64
	hitN, preN := 0, 0
	hitOver, preOver := false, false // a worker's value is beyond the float limit
	p.each(len(was), func(i int) {
		wa := was[i]
		if wa.tokenizer {
			return // no engine: its counts are its server's, beside its engines'
		}
		if wa.has[vllm.GenerationTokens] {
			gen = append(gen, wa.totals[vllm.GenerationTokens])
		}
		if h, ok := stepRatio(hitRate, &wa.totals, &wa.has); ok {
			hitN++
			switch {
			case !finite(h):
				hitOver = true
			// ids are sorted, so a tie keeps the first worker
			case worst.PrefixCacheHitRate == nil || h < worst.PrefixCacheHitRate.Value:
				worst.PrefixCacheHitRate = value(i, h)
			}
		}
		if wa.has[vllm.Preemptions] {
			preN++
			switch p := wa.totals[vllm.Preemptions]; {
			case !finite(p):
				preOver = true
			case worst.NumPreemptions == nil || p > worst.NumPreemptions.Value:
				worst.NumPreemptions = value(i, p)
			}
		}
	})
	if len(gen) >= 2 {
		var sum float64
		for _, g := range gen {
			sum += g
		}
		// a worker's total or their sum beyond the float limit leaves the mean unknown
		if mean := sum / float64(len(gen)); mean > 0 && finite(sum) {
			if v := slices.Max(gen) / mean; finite(v) {
				add(KeyImbalance, "", v)
			}
		}
	}
	if hitN < 2 || hitOver {
		worst.PrefixCacheHitRate = nil
	}
	if preN < 2 || preOver {
		worst.NumPreemptions = nil
	}
	if w := worst.PrefixCacheHitRate; w != nil {
		add(hitRate.Name, vllm.WorstWorker, w.Value)
	}
	if w := worst.NumPreemptions; w != nil {
		add(vllm.Counters[vllm.Preemptions].Name, vllm.WorstWorker, w.Value)
		if w.Value <= 0 {
			worst.NumPreemptions = nil // no preemptions anywhere: nobody to name
		}
	}
	if worst == (WorstWorkers{}) {
		return
	}
	if r.WorstWorkers == nil {
		r.WorstWorkers = &worst
		return
	}
	// A fleet of two engine kinds: the first kind's are WorstWorkers.
	if r.EngineWorstWorkers == nil {
		r.EngineWorstWorkers = map[string]*WorstWorkers{}
	}
	r.EngineWorstWorkers[vllm.Engines[p.kind].Prefix] = &worst
}
