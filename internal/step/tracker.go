package step

import (
	"math"
	"slices"
	"time"

	"github.com/vllmstat/vllmstat/internal/window"
)

// Options shape the records a Tracker produces.
type Options struct {
	Prefix    string // replaces the leading "vllm" of every key
	PerWorker bool   // add per_worker records
	Scalars   bool   // add the mean/max/p95 aggregates of the per-interval samples
	// OnInterval, if set, receives every worker's windowed values of every successful scrape
	// (for live views and per-interval exports). It runs on the tracker's goroutine.
	OnInterval func(Interval)
}

// Interval is one worker's values at one successful scrape: its gauges, the counter increases
// since its previous successful scrape, the interval's hit rate, and token rates over DT.
type Interval struct {
	WorkerID
	TS time.Time
	// DT is the time since the worker's previous successful scrape; 0 on its first.
	DT float64
	// Values is keyed like timeline series: "num_requests_running", "kv_cache_usage_perc",
	// "num_preemptions", "prefix_cache_hit_rate", "generation_tokens_per_s", ...
	Values map[string]float64
	// TargetLabels are the labels discovery gave the worker's target (see SetTargetLabels);
	// shared, read only.
	TargetLabels map[string]string
}

// Tracker turns a time-ordered stream of scrapes and step ends into step records. The live
// collector and replay feed it the same events, so they produce the same records. A Tracker is
// owned by one goroutine.
type Tracker struct {
	opt     Options
	workers map[WorkerID]*window.Worker
	started bool
	start   time.Time // start of the open step
	open    *acc
	lastOK  map[string]time.Time // each target's last successful scrape
	tried   map[string]time.Time // each target's last scrape, successful or not
	forgot  map[string]time.Time // when each target was forgotten, until it answers again
	seenAt  map[WorkerID]time.Time
	now     time.Time // the latest timestamp fed in
	labels  targetLabels
}

// acc accumulates the open step.
type acc struct {
	ok, failed int
	workers    map[WorkerID]*workerAcc
}

// workerAcc is one worker's share of the open step.
type workerAcc struct {
	scrapes int
	gauges  [window.NumGauges][]sample
	deltas  [window.NumCounters][]sample
	hitRate []sample
	totals  [window.NumCounters]float64
	has     [window.NumCounters]bool
	success map[string]float64
	hists   [window.NumHists]*window.HistDelta
	act     activity
}

type sample struct {
	t time.Time
	v float64
}

// NewTracker returns a tracker with no step open yet; the first scrape opens it.
func NewTracker(opt Options) *Tracker {
	if opt.Prefix == "" {
		opt.Prefix = "vllm"
	}
	return &Tracker{opt: opt, workers: map[WorkerID]*window.Worker{}, open: newAcc(), lastOK: map[string]time.Time{}, forgot: map[string]time.Time{}, tried: map[string]time.Time{}, seenAt: map[WorkerID]time.Time{}}
}

func newAcc() *acc { return &acc{workers: map[WorkerID]*workerAcc{}} }

// Observe feeds one scrape of target taken at ts: its parsed page, or the error that made it
// fail. Timestamps must not go backwards.
func (t *Tracker) Observe(ts time.Time, target string, page *window.Page, err error) {
	if !t.started {
		t.started, t.start = true, ts
	}
	t.now = ts
	prevTry, tried := t.tried[target]
	t.tried[target] = ts
	if err != nil || page == nil {
		t.open.failed++
		return
	}
	t.open.ok++
	// An engine first seen on this page counts from zero if it was created after the last time
	// the target answered without it (on the target's first answer, after the step start; on its
	// first answer since Forget, after it was forgotten):
	// everything it counted happened since, so it all belongs to this scrape's step.
	since := t.start
	if f, ok := t.forgot[target]; ok {
		since = f
		delete(t.forgot, target)
	}
	if last, ok := t.lastOK[target]; ok {
		since = last
	}
	t.lastOK[target] = ts
	stepStart := float64(since.UnixNano()) / 1e9
	for i := range page.Engines {
		ep := &page.Engines[i]
		id := WorkerID{Target: target, Engine: ep.Engine, Labels: ep.Labels}
		w := t.workers[id]
		if w == nil {
			w = window.NewWorker()
			t.workers[id] = w
		}
		inc := w.Observe(ep, stepStart)
		wa := t.open.workers[id]
		if wa == nil {
			wa = &workerAcc{}
			t.open.workers[id] = wa
		}
		wa.scrapes++
		wa.act.add(spanStart(prevTry, tried, t.start), ts, ep)
		for g := range ep.Gauges {
			if ep.HasGauge[g] {
				wa.gauges[g] = append(wa.gauges[g], sample{ts, ep.Gauges[g]})
			}
		}
		for c := range inc.Counters {
			if !inc.HasCounter[c] {
				continue
			}
			wa.has[c] = true
			wa.totals[c] += inc.Counters[c]
			wa.deltas[c] = append(wa.deltas[c], sample{ts, inc.Counters[c]})
		}
		if inc.HasCounter[window.PrefixHits] && inc.Counters[window.PrefixQueries] > 0 {
			wa.hitRate = append(wa.hitRate, sample{ts, inc.Counters[window.PrefixHits] / inc.Counters[window.PrefixQueries]})
		}
		for r, v := range inc.Success {
			if wa.success == nil {
				wa.success = map[string]float64{}
			}
			wa.success[r] += v
		}
		for h, d := range inc.Hists {
			if d != nil {
				wa.hists[h] = addHist(wa.hists[h], d)
			}
		}
		if t.opt.OnInterval != nil {
			t.opt.OnInterval(t.interval(id, ts, ep, &inc))
		}
		t.seenAt[id] = ts
	}
}

func (t *Tracker) interval(id WorkerID, ts time.Time, ep *window.EnginePage, inc *window.Increase) Interval {
	iv := Interval{WorkerID: id, TS: ts, Values: map[string]float64{}, TargetLabels: t.labels.of(id.Target)}
	if prev, ok := t.seenAt[id]; ok {
		iv.DT = ts.Sub(prev).Seconds()
	}
	for g := range ep.Gauges {
		if ep.HasGauge[g] {
			iv.Values[window.GaugeNames[g]] = ep.Gauges[g]
		}
	}
	for c := range inc.Counters {
		if inc.HasCounter[c] && window.Counter(c) != window.RequestSuccess {
			iv.Values[window.CounterNames[c]] = inc.Counters[c]
		}
	}
	if inc.HasCounter[window.PrefixHits] && inc.Counters[window.PrefixQueries] > 0 {
		iv.Values["prefix_cache_hit_rate"] = inc.Counters[window.PrefixHits] / inc.Counters[window.PrefixQueries]
	}
	if iv.DT > 0 {
		for _, c := range []window.Counter{window.GenerationTokens, window.PromptTokens} {
			if inc.HasCounter[c] {
				iv.Values[window.CounterNames[c]+"_per_s"] = inc.Counters[c] / iv.DT
			}
		}
	}
	return iv
}

func addHist(acc, d *window.HistDelta) *window.HistDelta {
	if acc == nil {
		return &window.HistDelta{Buckets: append([]window.Bucket(nil), d.Buckets...), Sum: d.Sum, Count: d.Count, NoSum: d.NoSum}
	}
	acc.Sum += d.Sum
	acc.Count += d.Count
	acc.NoSum = acc.NoSum || d.NoSum
	acc.Buckets = window.MergeBuckets(acc.Buckets, d.Buckets)
	return acc
}

// EndStep closes the open step as step n at ts (after the boundary scrape has been observed)
// and opens the next one.
func (t *Tracker) EndStep(n int64, ts time.Time) Record {
	if !t.started {
		t.started, t.start = true, ts
	}
	r := t.build(n, t.start, ts)
	t.labels.stepEnded()
	t.start, t.now = ts, ts
	t.open = newAcc()
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
	a := t.open
	r := Record{
		Step:      n,
		Start:     start,
		End:       end,
		DurationS: end.Sub(start).Seconds(),
		Scrapes:   Scrapes{OK: a.ok, Failed: a.failed},
		Timeline:  &Timeline{Start: start},
	}
	ids := make([]WorkerID, 0, len(a.workers))
	for id, wa := range a.workers {
		if wa.scrapes > 0 {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, WorkerID.Compare)
	r.Workers = len(ids)
	was := make([]*workerAcc, len(ids))
	for i, id := range ids {
		was[i] = a.workers[id]
	}
	r.Metrics = t.metrics(was, r.DurationS)
	for i, id := range ids {
		if t.opt.PerWorker {
			r.PerWorker = append(r.PerWorker, WorkerRecord{Target: id.Target, Engine: id.Engine, Labels: id.LabelMap(), Metrics: t.metrics(was[i:i+1], r.DurationS),
				TargetLabels: t.labels.of(id.Target)})
		}
		r.Timeline.Workers = append(r.Timeline.Workers, timeline(id, was[i], start))
	}
	t.balance(&r, ids, was, start)
	return r
}

// metrics computes the step's keys over a pool of workers (all of them, or one).
func (t *Tracker) metrics(was []*workerAcc, durS float64) map[string]float64 {
	m := map[string]float64{}
	key := func(name string) string { return t.opt.Prefix + "/" + name }
	var totals [window.NumCounters]float64
	var has [window.NumCounters]bool
	success := map[string]float64{}
	var hists [window.NumHists]*window.HistDelta
	for _, wa := range was {
		for c := range totals {
			if wa.has[c] {
				has[c] = true
				totals[c] += wa.totals[c]
			}
		}
		for r, v := range wa.success {
			success[r] += v
		}
		for h, d := range wa.hists {
			if d != nil {
				hists[h] = addHist(hists[h], d)
			}
		}
	}
	for c := range totals {
		if has[c] && window.Counter(c) != window.RequestSuccess {
			m[key(window.CounterNames[c])] = totals[c]
		}
	}
	for r, v := range success {
		m[key("request_success/"+r)] = v
	}
	if has[window.PrefixHits] && totals[window.PrefixQueries] > 0 {
		m[key("prefix_cache_hit_rate")] = totals[window.PrefixHits] / totals[window.PrefixQueries]
	}
	if durS > 0 {
		if has[window.GenerationTokens] {
			m[key("generation_tokens_per_s")] = totals[window.GenerationTokens] / durS
		}
		if has[window.PromptTokens] {
			m[key("prompt_tokens_per_s")] = totals[window.PromptTokens] / durS
		}
	}
	if t.opt.Scalars {
		for g := range window.NumGauges {
			pool(m, key(window.GaugeNames[g]), was, func(wa *workerAcc) []sample { return wa.gauges[g] })
		}
		pool(m, key("prefix_cache_hit_rate"), was, func(wa *workerAcc) []sample { return wa.hitRate })
		for _, c := range []window.Counter{window.PrefixQueries, window.PrefixHits, window.Preemptions, window.GenerationTokens} {
			pool(m, key(window.CounterNames[c]), was, func(wa *workerAcc) []sample { return wa.deltas[c] })
		}
	}
	for h, d := range hists {
		if d == nil || d.Count <= 0 {
			continue
		}
		k := key(window.HistNames[h])
		for _, q := range []struct {
			name string
			q    float64
		}{{"p50", 0.5}, {"p95", 0.95}, {"p99", 0.99}} {
			if v, ok := HistogramQuantile(q.q, d.Buckets); ok {
				m[k+"/"+q.name] = v
			}
		}
		if !d.NoSum {
			m[k+"/mean"] = d.Sum / d.Count
		}
	}
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(m, k) // trackers take finite numbers only
		}
	}
	return m
}

// pool adds mean/max/p95 of the samples of all workers under key.
func pool(m map[string]float64, key string, was []*workerAcc, get func(*workerAcc) []sample) {
	var xs []float64
	for _, wa := range was {
		for _, s := range get(wa) {
			xs = append(xs, s.v)
		}
	}
	if s, ok := summarize(xs); ok {
		m[key+"/mean"] = s.mean
		m[key+"/max"] = s.max
		m[key+"/p95"] = s.p95
	}
}

func timeline(id WorkerID, wa *workerAcc, start time.Time) WorkerTimeline {
	wt := WorkerTimeline{WorkerID: id, Series: map[string][]Point{}}
	add := func(name string, ss []sample) {
		if len(ss) == 0 {
			return
		}
		ps := make([]Point, len(ss))
		for i, s := range ss {
			ps[i] = Point{OffsetS: s.t.Sub(start).Seconds(), Value: s.v}
		}
		wt.Series[name] = ps
	}
	for g := range window.NumGauges {
		add(window.GaugeNames[g], wa.gauges[g])
	}
	for c := range window.NumCounters {
		if window.Counter(c) != window.RequestSuccess {
			add(window.CounterNames[c], wa.deltas[c])
		}
	}
	add("prefix_cache_hit_rate", wa.hitRate)
	return wt
}
