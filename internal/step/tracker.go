package step

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
	"github.com/vllmstat/vllmstat/internal/window"
)

// Options shape the records a Tracker produces.
type Options struct {
	// Prefix replaces the leading "vllm" of every key; another engine's keys begin with
	// vllm.EnginePrefix(Prefix, engine).
	Prefix    string
	PerWorker bool // add per_worker records
	Scalars   bool // add the mean/max/p95 aggregates of the per-interval samples
	// NoTimeline leaves Record.Timeline nil, for a run that draws, writes and prints no
	// timelines: the open step then keeps only the samples its statistics need, not their times
	// nor the series only timelines show.
	NoTimeline bool
	// OnInterval, if set, receives every worker's windowed values of every successful scrape
	// (for live views and per-interval exports). It runs on the tracker's goroutine. The
	// Interval's Values are the tracker's until the call returns: a consumer that keeps them
	// keeps a Clone. A fleet has thousands of intervals a second: a map for each was a fifth of
	// the garbage vllmstat made, and one map reused, written and read by key, 4 % of its CPU.
	OnInterval func(Interval)
	// Peak is one GPU's peak, which the compute keys' MFU and MBU are shares of (see
	// computeValues); zero fields leave them out.
	Peak vllm.Peak
}

// Interval is one worker's values at one successful scrape: its gauges, the counter increases
// since its previous successful scrape, the interval's hit rate, and token rates over DT.
type Interval struct {
	WorkerID
	// Kind is the worker's engine kind: its keys begin with vllm.EnginePrefix(prefix, Kind).
	Kind vllm.Engine
	TS   time.Time
	// DT is the time since the worker's previous successful scrape; 0 on its first.
	DT float64
	// Values are keyed like timeline series: "num_requests_running", "kv_cache_usage_perc",
	// "num_preemptions", "prefix_cache_hit_rate", "generation_tokens_per_s", ...; each key once,
	// in the spec's order (gauges, counters, ratios, rates).
	Values []IntervalValue
	// TargetLabels are the labels discovery gave the worker's target (see SetTargetLabels);
	// shared, read only.
	TargetLabels map[string]string
}

// IntervalValue is one value of an Interval.
type IntervalValue struct {
	Key string
	V   float64
}

// Value returns the value of key, and whether the interval has one.
func (iv *Interval) Value(key string) (float64, bool) {
	for _, v := range iv.Values {
		if v.Key == key {
			return v.V, true
		}
	}
	return 0, false
}

// Clone returns iv with Values of its own, for a consumer of Options.OnInterval that keeps it.
func (iv Interval) Clone() Interval {
	iv.Values = slices.Clone(iv.Values)
	return iv
}

// Tracker turns a time-ordered stream of scrapes and step ends into step records. The live
// collector and replay feed it the same events, so they produce the same records. A Tracker is
// owned by one goroutine.
type Tracker struct {
	opt     Options
	workers map[WorkerID]*workerState
	targets map[string]*targetState
	started bool
	start   time.Time // start of the open step
	seq     uint64    // the open step's number in this tracker, from 1
	open    *acc
	forgot  map[string]forgotten // each target forgotten, until it answers again
	// departed are the workers forgotten: one back is no new worker (see Observe).
	departed departedWorkers
	now      time.Time // the latest timestamp fed in
	labels   targetLabels
	values   []IntervalValue // the Values of every Interval, emptied after each
	// scratch holds the increases of the worker observed last: every worker's Increase is
	// added to the step (and its phase, and OnInterval's) before the next worker is observed.
	scratch window.Scratch
	keep    keep

	// runStart is when the run began collecting (Begin); a worker first seen in any step counts
	// whole the series created after it.
	runStart    time.Time
	hasRunStart bool

	phase     string               // the open phase, "" when none
	phases    map[string]*phaseAcc // the phases of the open step
	phaseKeep keep                 // what a phase keeps: the open step's series, untimed

	pol policy // the trainer's policy versions (see policy.go)
}

// workerState is what the tracker keeps of a worker across steps, until it is forgotten (see
// forgetDeparted).
type workerState struct {
	w    *window.Worker
	seen bool
	kind vllm.Engine // the kind of its last page
	// engine is set once a page shows the worker is an engine: only then is it in the time
	// ledger (see isEngine). slept is whether its last sample was asleep or waking from sleep.
	engine, slept bool
	seenAt        time.Time          // its last successful scrape, when seen
	busy          bool               // its last page may have shown requests in flight (see inFlight)
	inStep        uint64             // the seq of the last step in which a page of its target showed it
	page          uint64             // the number of the last successful page of its target that showed it
	loads         map[string]float64 // SGLang's last weight load durations by source; nil without the family
	// sgGauges are the gauges of its last SGLang page (sgSeen: it had one), to tell whether the
	// next page's log-point figures were refreshed (see sglangTime).
	sgGauges [vllm.NumGauges]float64
	sgSeen   bool
	sgMoved  time.Time // the scrape at which its scheduler's stage or idle seconds last moved
	pv       policyWorker
}

// forgotten is a target forgotten: when, and whether it had answered in the run before.
type forgotten struct {
	at       time.Time
	answered bool
}

// targetState is what the tracker keeps of a target across steps.
type targetState struct {
	triedAt, lastOK     time.Time // its last scrape, and its last successful one
	hasTried, hasLastOK bool
	late                bool    // added while the run ran (Added)
	refused             bool    // every scrape of it so far was refused
	undated             bool    // Observe reported it undated
	answered            uint64  // the seq of the last step in which it answered
	pages               uint64  // its successful pages so far
	stepWorkers         int     // the workers its pages have shown in the open step, tokenizers apart
	stepTokenizers      int     // the SGLang tokenizers they have shown (see page.EnginePage.Tokenizer)
	reported            version // the version its engine reports; none when it reports none
	// engVer is the lowest version the engines of its last page held (hasEngines: it had
	// some), which the workers of the page that are no engines hold (see policySample).
	engVer     version
	hasEngines bool
	// servers are the versions the servers a router's page names report, by worker_addr, and
	// serverEngVer the lowest version each one's engines hold (see servers.go); nil for a
	// target that is no router.
	servers      map[string]version
	serverEngVer map[string]version
	// The workers of its last successful page, in page order: its next page nearly always has
	// the same ones in the same order, found so without hashing their names.
	engines []engineRef
}

// engineRef is a worker of a target's last page: its names, its state, and its share of the
// open step (nil until the worker's first scrape in it: EndStep clears it, so that a closed
// step is not kept alive by a target that went quiet).
type engineRef struct {
	engine, labels string
	ws             *workerState
	wa             *workerAcc
}

// keep says which per-interval series an open step keeps, and which of them with their times:
// those the records' statistics or timelines use, by index of vllm.Gauges, Counters, Ratios.
type keep struct {
	gauges, timedGauges     [vllm.NumGauges]bool
	counters, timedCounters [vllm.NumCounters]bool
	ratios, timedRatios     []bool
	derivedRatios           []bool // computed from the counters' columns while they allow
}

func newKeep(opt Options) keep {
	var k keep
	for g, f := range vllm.Gauges {
		k.timedGauges[g] = f.Timeline && !opt.NoTimeline
		k.gauges[g] = f.Scalars && opt.Scalars || k.timedGauges[g]
	}
	for c, f := range vllm.Counters {
		k.timedCounters[c] = f.Timeline && !opt.NoTimeline
		k.counters[c] = f.Scalars && opt.Scalars || k.timedCounters[c]
	}
	for _, rt := range vllm.Ratios {
		timed := rt.Timeline && !opt.NoTimeline
		k.timedRatios = append(k.timedRatios, timed)
		k.ratios = append(k.ratios, rt.Scalars && opt.Scalars || timed)
	}
	for i, rt := range vllm.Ratios {
		k.derivedRatios = append(k.derivedRatios, derivable(&k, rt, k.timedRatios[i]))
	}
	return k
}

// acc accumulates the open step.
type acc struct {
	ok, failed int
	workers    map[WorkerID]*workerAcc
}

// workerAcc is one worker's share of the open step. Its series hold what the Tracker's keep
// asks for; the others stay empty.
type workerAcc struct {
	kind           vllm.Engine // the kind of the worker's pages
	scrapes        int
	gauges         [vllm.NumKeyedGauges]series
	splitGaugeCols [numSplitGaugeSlots]map[string]*floats // split gauges' samples by the label's value, by splitGaugeSlot
	deltaCols      [numDeltaSlots]series                  // the counters' per-interval increases, by deltaSlot
	ratioCols      []ratioSeries                          // the per-interval ratios, by ratioSlot
	totals         [vllm.NumCounters]float64
	has            [vllm.NumCounters]bool
	splitCols      [numSplitSlots]map[string]float64 // by the split label's value, by splitSlot
	hists          [vllm.NumHists]*histAcc
	act            activity
	led            ledger
	stale          float64 // generation tokens made on a version older than the trainer's latest
	ends           ends    // whether requests were in flight at the step's ends

	// tokenizer is set when the worker is no engine but SGLang's tokenizer (see
	// page.EnginePage.Tokenizer): its counts add to the fleet's, and it is in no engine count
	// nor any key that compares workers.
	tokenizer bool
	// negative are the histograms (bits by vllm.Hist) refused in the step for a bucket below 0
	// (see negativeBound).
	negative uint32
}

// ends are whether a worker may have had requests in flight at the start of its step (its page
// before the step's first, or the first itself for a worker not seen before) and at its last
// page of the step.
type ends struct {
	set, start, end bool
}

func (e *ends) add(before, now bool) {
	if !e.set {
		e.set, e.start = true, before
	}
	e.end = now
}

// inFlight reports whether a page may show requests in flight: requests running or waiting (a
// preempted request waits after its prefill), or no gauges to tell.
func inFlight(ep *page.EnginePage) bool {
	return !ep.HasGauge[vllm.Running] || !ep.HasGauge[vllm.Waiting] || ep.Gauges[vllm.Running] != 0 || ep.Gauges[vllm.Waiting] != 0
}

// series is one per-interval series of a worker in the open step: its values in the order of
// their scrapes, and, when timelines show it, each one's time since the step start.
type series struct {
	v floats
	// at holds nanoseconds since the step start; nil when no timeline shows the series. A
	// worker's step keeps 29 series, most never timed, and a column kept in place for each
	// was a third of what a worker's step held before its first sample.
	at *ints
}

func (s *series) add(at time.Duration, v float64, timed bool) {
	s.v.add(v)
	if timed {
		if s.at == nil {
			s.at = &ints{}
		}
		s.at.add(int64(at))
	}
}

// NewTracker returns a tracker with no step open yet; the first scrape opens it.
func NewTracker(opt Options) *Tracker {
	if opt.Prefix == "" {
		opt.Prefix = vllm.Prefix
	}
	untimed := opt
	untimed.NoTimeline = true
	return &Tracker{opt: opt, workers: map[WorkerID]*workerState{}, targets: map[string]*targetState{}, seq: 1, open: newAcc(), forgot: map[string]forgotten{},
		keep: newKeep(opt), phaseKeep: newKeep(untimed), phases: map[string]*phaseAcc{}}
}

func newAcc() *acc { return &acc{workers: map[WorkerID]*workerAcc{}} }

// Observe feeds one scrape of target taken at ts: its parsed page, or the error that made it
// fail. Timestamps must not go backwards. It reports undated the first time a page of target
// shows a worker for the first time with counts already made and no _created to date them:
// they are taken as a baseline, though the engine may have made them after the run started.
//
// One rule decides whether a worker's first page is a baseline: a worker first seen after
// evidence that it was not there counts whole, with or without _created, as a series that
// appears on a worker seen before does (package window). The evidence is
//   - earlier pages of its target in the run that did not show it (an SGLang server's tokenizer
//     series, a worker of their own with data parallelism, appear with its first finished
//     request; a data-parallel engine that comes up late), unless the run saw the worker before
//     and forgot it (see Forget, forgetDeparted), whose return forgetting's rule decides;
//   - every scrape of its target since the run started refused (Refused): its server started
//     during the run; unless the target was added while the run ran (Added).
//
// Without evidence a worker's first page is a baseline, unless _created dates its counts after
// its target's last answer.
func (t *Tracker) Observe(ts time.Time, target string, pg *page.Page, err error) (undated bool) {
	if !t.started {
		t.started, t.start = true, ts
	}
	t.now = ts
	tgt := t.targets[target]
	if tgt == nil {
		tgt = &targetState{}
		t.targets[target] = tgt
	}
	prevTry, tried := tgt.triedAt, tgt.hasTried
	tgt.triedAt, tgt.hasTried = ts, true
	pa := t.openPhase()
	if err != nil || pg == nil {
		tgt.tried(!tried, err)
		t.open.failed++
		if pa != nil {
			pa.acc.failed++
		}
		t.unreachable(target, tgt, prevTry, tried, ts, pa)
		return false
	}
	t.open.ok++
	if pa != nil {
		pa.acc.ok++
	}
	// A worker first seen on this page counts whole if there is evidence that it was not there
	// before: the target's earlier pages in the run did not show it, or its server refused
	// every connection since the run started. Otherwise it counts from zero if
	// it was created after the last time the target answered without it: on the target's first
	// answer, after the run started (after the step start for a recording without a start
	// event); on its first answer since Forget, after it was forgotten. Everything it counted
	// happened since, so it all belongs to this scrape's step. An engine that ran before the run
	// is a baseline: its earlier counts are nobody's.
	since := t.start
	if t.hasRunStart {
		since = t.runStart
	}
	absent := tgt.pages > 0 || tgt.refused && !tgt.late
	if f, ok := t.forgot[target]; ok {
		since = f.at
		absent = absent || f.answered
		delete(t.forgot, target)
	}
	if tgt.hasLastOK {
		since = tgt.lastOK
	}
	tgt.refused = false
	tgt.lastOK, tgt.hasLastOK = ts, true
	tgt.answered = t.seq
	tgt.pages++
	stepStart := float64(since.UnixNano()) / 1e9
	at := ts.Sub(t.start) // the offset of this scrape's samples in timelines
	k := &t.keep
	if len(tgt.engines) != len(pg.Engines) {
		// Workers came or went: find them all by name (EndStep clears only what is in use).
		tgt.engines = make([]engineRef, len(pg.Engines))
	}
	for i := range pg.Engines {
		ep := &pg.Engines[i]
		id := WorkerID{Target: target, Engine: ep.Engine, Labels: ep.Labels}
		ref := &tgt.engines[i]
		if ref.ws == nil || ref.engine != ep.Engine || ref.labels != ep.Labels {
			*ref = engineRef{engine: ep.Engine, labels: ep.Labels, ws: t.workers[id]}
			if ref.ws == nil {
				ref.ws = &workerState{w: window.NewWorkerSharing(&t.scratch)}
				ref.ws.pv.addr = workerAddr(ep.Labels)
				t.workers[id] = ref.ws
				if absent && !t.departed.has(id) {
					ref.ws.w.Absent()
				}
			}
		}
		if ref.wa == nil {
			ref.wa = t.open.workers[id]
			if ref.wa == nil {
				ref.wa = &workerAcc{}
				t.open.workers[id] = ref.wa
			}
		}
		ws, wa := ref.ws, ref.wa
		if ws.inStep != t.seq {
			ws.inStep = t.seq
			if ep.Tokenizer() {
				tgt.stepTokenizers++
			} else {
				tgt.stepWorkers++
			}
		}
		ws.page = tgt.pages
		ep = ws.w.Pick(ep) // the copy of its figures the worker keeps to
		inc := ws.w.Observe(ep, stepStart)
		if inc.Undated && !tgt.undated {
			tgt.undated, undated = true, true
		}
		ws.kind = ep.Kind
		ws.engine = ws.engine || isEngine(ep)
		var state State
		var load int64
		var sg sgBooking
		if ws.engine {
			state, ws.slept = classify(ep, ws.slept)
			load = ws.newLoads(ep, ws.seen)
			if ep.Kind == vllm.SGLang {
				sg = ws.sglangTime(ep, &inc, state, ts)
				state = sg.s
			}
		}
		book := func(l *ledger, from time.Time) {
			if sg.split {
				l.addSplit(sg.from, from, ts, sg.idle, load, keepsSpans[ep.Kind])
			} else {
				l.add(from, ts, state, load, keepsSpans[ep.Kind])
			}
		}
		from := spanStart(prevTry, tried, t.start)
		wa.add(k, at, from, ts, ep, &inc)
		if ws.engine {
			book(&wa.led, from)
		}
		if pa != nil {
			pw := pa.acc.worker(id)
			from := spanStart(prevTry, tried, pa.since)
			pw.add(&t.phaseKeep, at, from, ts, ep, &inc)
			if ws.engine {
				book(&pw.led, from)
			}
		}
		busy := inFlight(ep)
		before := busy
		if ws.seen {
			before = ws.busy
		}
		wa.ends.add(before, busy)
		if pa != nil {
			pa.acc.worker(id).ends.add(before, busy)
		}
		ws.busy = busy
		wa.stale += t.policySample(ws, tgt, ts, weightStateOf(state, ws.engine), load, &inc)
		if t.opt.OnInterval != nil {
			t.opt.OnInterval(t.interval(id, ws, ts, ep, &inc))
			t.values = t.values[:0]
		}
		ws.seen, ws.seenAt = true, ts
	}
	tgt.engineVersions()
	return undated
}

// unreachable books the span of a failed scrape of target at ts (since its previous scrape,
// prevTry when tried) as unreachable to every engine its last page showed, in the open step
// and in the open phase pa.
func (t *Tracker) unreachable(target string, tgt *targetState, prevTry time.Time, tried bool, ts time.Time, pa *phaseAcc) {
	for i := range tgt.engines {
		ref := &tgt.engines[i]
		ws := ref.ws
		if ws == nil || !ws.engine {
			continue
		}
		id := WorkerID{Target: target, Engine: ref.engine, Labels: ref.labels}
		if ref.wa == nil {
			ref.wa = t.open.worker(id)
		}
		book := func(wa *workerAcc, since time.Time) {
			if wa.scrapes == 0 {
				wa.kind = ws.kind // down since the start: of its last page's kind
			}
			wa.led.add(spanStart(prevTry, tried, since), ts, Unreachable, 0, keepsSpans[ws.kind])
		}
		book(ref.wa, t.start)
		if pa != nil {
			book(pa.acc.worker(id), pa.since)
		}
	}
}

// add adds one scrape of the worker to its share of a step or phase: the page's gauges, the
// increases inc, and the activity of the span from..ts; at is the scrape's offset from the step
// start, for the series k keeps with their times.
func (wa *workerAcc) add(k *keep, at time.Duration, from, ts time.Time, ep *page.EnginePage, inc *window.Increase) {
	wa.scrapes++
	wa.kind = ep.Kind
	wa.tokenizer = ep.Tokenizer()
	state := ep.SplitGauges[vllm.SleepState]
	asleep := vllm.EngineAsleep(state, ep.SplitGauges[vllm.ResourceState])
	wa.act.add(from, ts, ep, state != nil, asleep)
	for g := range vllm.NumKeyedGauges {
		if !k.gauges[g] || asleep && vllm.Load[g] {
			continue
		}
		if ep.HasGauge[g] {
			wa.gauges[g].add(at, ep.Gauges[g], k.timedGauges[g])
		}
		if vllm.Gauges[g].Split == "" {
			continue // a gauge's parts make no keys
		}
		for v, x := range ep.SplitGauges[g] {
			sg := &wa.splitGaugeCols[splitGaugeSlot[g]]
			if *sg == nil {
				*sg = map[string]*floats{}
			}
			c := (*sg)[v]
			if c == nil {
				c = &floats{}
				(*sg)[v] = c
			}
			c.add(x)
		}
	}
	for c := range inc.Counters {
		if !inc.HasCounter[c] {
			continue
		}
		wa.has[c] = true
		wa.totals[c] += inc.Counters[c]
		if k.counters[c] {
			wa.deltaCols[deltaSlot[c]].add(at, inc.Counters[c], k.timedCounters[c])
		}
	}
	wa.observeRatios(k, at, inc)
	for c, shares := range inc.Shares {
		for _, sh := range shares {
			sp := &wa.splitCols[splitSlot[c]]
			if *sp == nil {
				*sp = map[string]float64{}
			}
			(*sp)[sh.Value] += sh.Inc
		}
	}
	for h, d := range inc.Hists {
		if d != nil {
			if negativeBound(d) {
				wa.negative |= 1 << h
				continue
			}
			if wa.hists[h] == nil {
				wa.hists[h] = &histAcc{}
			}
			wa.hists[h].addDelta(d)
		}
	}
}

// worker returns the worker's share of a, made when new.
func (a *acc) worker(id WorkerID) *workerAcc {
	wa := a.workers[id]
	if wa == nil {
		wa = &workerAcc{}
		a.workers[id] = wa
	}
	return wa
}

// interval is a worker's Interval at ts, before ws records this scrape.
func (t *Tracker) interval(id WorkerID, ws *workerState, ts time.Time, ep *page.EnginePage, inc *window.Increase) Interval {
	vs := t.values[:0]
	add := func(k string, v float64) { vs = append(vs, IntervalValue{k, v}) }
	var dt float64
	if ws.seen {
		dt = ts.Sub(ws.seenAt).Seconds()
	}
	for g, f := range vllm.Gauges {
		if ep.HasGauge[g] && f.Timeline {
			add(f.Name, ep.Gauges[g])
		}
	}
	// An increase beyond the float limit is no value, and neither is anything computed from it.
	for c, f := range vllm.Counters {
		if inc.HasCounter[c] && f.Timeline && finite(inc.Counters[c]) {
			add(f.Name, inc.Counters[c])
		}
	}
	for _, rt := range vllm.Ratios {
		if v, ok := ratio(rt, &inc.Counters, &inc.HasCounter); ok && rt.Timeline && finite(v) {
			add(rt.Name, v)
		}
	}
	if dt > 0 {
		for i, rt := range vllm.Rates {
			if v := inc.Counters[rt.Of] / dt; inc.HasCounter[rt.Of] && finite(v) {
				add(rateNames[i], v)
			}
		}
	}
	t.values = vs
	return Interval{WorkerID: id, Kind: ep.Kind, TS: ts, DT: dt, Values: vs, TargetLabels: t.labels.of(id.Target)}
}

// rateNames are the names of vllm.Rates, made once.
var rateNames = func() []string {
	names := make([]string, len(vllm.Rates))
	for i, rt := range vllm.Rates {
		names[i] = rt.Name()
	}
	return names
}()

// EndStep closes the open step as step n at ts (after the boundary scrape has been observed)
// and opens the next one. A phase open at ts ends with the step and opens again in the next.
// The workers that departed in the step are forgotten (see forgetDeparted) and named in the
// record's Forgotten.
func (t *Tracker) EndStep(n int64, ts time.Time) Record {
	if !t.started {
		t.started, t.start = true, ts
	}
	r := t.build(n, t.start, ts)
	r.RatiosOver = t.ratiosOver(t.open)
	r.NegativeBounds = t.negativeBounds(t.open)
	r.Forgotten = t.forgetDeparted()
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
		d := pa.dur
		if name == t.phase {
			d += end.Sub(pa.since)
		}
		ph := &Phase{DurationS: d.Seconds(), Intervals: pa.intervals}
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

// kindPool is the workers of one engine kind, by their index among a step's workers.
type kindPool struct {
	kind vllm.Engine
	idx  []int // nil for all of them
}

// poolsByKind splits a step's workers by engine kind, in the order of the kinds; a step whose
// workers are of one kind has one pool of them all.
func poolsByKind(was []*workerAcc) []kindPool {
	var ps []kindPool
	for _, wa := range was {
		if !slices.ContainsFunc(ps, func(p kindPool) bool { return p.kind == wa.kind }) {
			ps = append(ps, kindPool{kind: wa.kind})
		}
	}
	if len(ps) <= 1 {
		return ps
	}
	slices.SortFunc(ps, func(a, b kindPool) int { return cmp.Compare(a.kind, b.kind) })
	for i := range ps {
		for j, wa := range was {
			if wa.kind == ps[i].kind {
				ps[i].idx = append(ps[i].idx, j)
			}
		}
	}
	return ps
}

// of returns the pool's workers among was.
func (p kindPool) of(was []*workerAcc) []*workerAcc {
	if p.idx == nil {
		return was
	}
	out := make([]*workerAcc, len(p.idx))
	for j, i := range p.idx {
		out[j] = was[i]
	}
	return out
}

// each calls f with the index of each of the pool's workers among n.
func (p kindPool) each(n int, f func(i int)) {
	if p.idx == nil {
		for i := range n {
			f(i)
		}
		return
	}
	for _, i := range p.idx {
		f(i)
	}
}

// tag marks vs as values of the pool's engine kind, and returns them.
func (p kindPool) tag(vs []vllm.Value) []vllm.Value {
	if p.kind != vllm.VLLM {
		for i := range vs {
			vs[i].Kind = p.kind
		}
	}
	return vs
}

// metrics computes the step's values over a pool of workers (all of them, or one), as package
// vllm describes them, in no particular order.
func (t *Tracker) metrics(was []*workerAcc, durS float64) []vllm.Value {
	var m []vllm.Value
	add := func(name, label, stat string, v float64) {
		m = append(m, vllm.Value{Name: name, Label: label, Stat: stat, V: v})
	}
	var totals [vllm.NumCounters]float64
	var has [vllm.NumCounters]bool
	var split [vllm.NumCounters]map[string]float64
	var hists [vllm.NumHists]*histAcc
	for _, wa := range was {
		for c := range totals {
			if wa.has[c] {
				has[c] = true
				totals[c] += wa.totals[c]
			}
		}
		for sl, m := range wa.splitCols {
			c := slotCounter[sl]
			for r, v := range m {
				if split[c] == nil {
					split[c] = map[string]float64{}
				}
				split[c][r] += v
			}
		}
		for h, d := range wa.hists {
			if d != nil {
				if hists[h] == nil {
					hists[h] = &histAcc{}
				}
				hists[h].add(d)
			}
		}
	}
	for c, f := range vllm.Counters {
		switch {
		case !f.Total:
		case f.Split != "":
			for r, v := range split[c] {
				add(f.Name, r, "", v)
			}
		case has[c]:
			add(f.Name, "", "", totals[c])
		}
	}
	for _, sm := range vllm.Sums {
		var v float64
		var any bool
		for _, c := range sm.Of {
			if has[c] {
				v, any = v+totals[c], true
			}
		}
		if any {
			add(sm.Name, "", "", v)
		}
	}
	for _, pt := range vllm.LabelParts {
		if !has[pt.Of] || pt.AddsUp && !partsCover(was, pt) {
			continue
		}
		var v float64
		for _, val := range pt.Values {
			v += split[pt.Of][val]
		}
		switch {
		case !pt.Share:
			add(pt.Name, "", "", v)
		case totals[pt.Of] > 0 && finite(v) && finite(totals[pt.Of]):
			add(pt.Name, "", "", v/totals[pt.Of])
		}
	}
	for _, u := range vllm.Unfinisheds {
		if v, ok := unfinished(was, u); ok {
			add(u.Name, "", "", v)
		}
	}
	for _, sr := range vllm.SumRatios {
		if v, ok := sumRatio(was, sr); ok {
			add(sr.Name, "", "", v)
		}
	}
	for _, rt := range vllm.Ratios {
		if rt.Paired && !paired(was, rt) {
			continue
		}
		if v, ok := stepRatio(rt, &totals, &has); ok {
			add(rt.Name, "", "", v)
		}
		if vllm.Counters[rt.Num].Split != "" {
			for r, v := range split[rt.Num] {
				if q, ok := stepQuotient(rt, v, totals[rt.Den]); ok {
					add(rt.Name, r, "", q)
				}
			}
		}
	}
	if durS > 0 {
		for _, rt := range vllm.Rates {
			if has[rt.Of] {
				add(rt.Name(), "", "", totals[rt.Of]/durS)
			}
		}
	}
	if t.opt.Scalars {
		var buf []float64 // one pool's samples at a time
		for g, f := range vllm.Gauges[:vllm.NumKeyedGauges] {
			switch {
			case !f.Scalars:
			case f.Split != "":
				values := map[string]bool{}
				for _, wa := range was {
					for v := range wa.splitGaugeOf(vllm.Gauge(g)) {
						values[v] = true
					}
				}
				for v := range values {
					pool(add, f.Name, v, was, &buf, func(wa *workerAcc, xs []float64) []float64 {
						if c := wa.splitGaugeOf(vllm.Gauge(g))[v]; c != nil {
							return c.appendTo(xs)
						}
						return xs
					})
				}
			default:
				pool(add, f.Name, "", was, &buf, func(wa *workerAcc, xs []float64) []float64 { return wa.gauges[g].v.appendTo(xs) })
			}
		}
		for i, rt := range vllm.Ratios {
			if rt.Scalars {
				pool(add, rt.Name, "", was, &buf, func(wa *workerAcc, xs []float64) []float64 {
					if wa.ratioOver(i) {
						return xs // its intervals are no figures either (see ratioover.go)
					}
					return wa.appendRatios(i, rt.Fraction, xs)
				})
			}
		}
		for c, f := range vllm.Counters {
			if f.Scalars {
				pool(add, f.Name, "", was, &buf, func(wa *workerAcc, xs []float64) []float64 { return wa.delta(vllm.Counter(c)).v.appendTo(xs) })
			}
		}
	}
	for h, d := range hists {
		if d == nil || d.count <= 0 || !countsFinite(d) {
			continue // no observations, or more than a float holds: no quantile can be told
		}
		name := vllm.Hists[h].Name
		buckets, ok := sortedBuckets(d.buckets())
		for _, q := range vllm.HistQuantiles {
			if !ok {
				break
			}
			if e, ok := boundedQuantile(q.Q, buckets, d.sum, !d.noSum); ok {
				add(name, "", q.Stat, e.v)
				if e.only { // the estimate is only a range: say which (see boundedQuantile)
					add(name, "", q.Lo, e.lo)
					if !math.IsInf(e.hi, 1) {
						add(name, "", q.Hi, e.hi)
					}
				}
			}
		}
		if !d.noSum {
			add(name, "", vllm.StatMean, d.sum/d.count)
		}
	}
	// Trackers take finite numbers only. A sum beyond the float limit stays infinite (or NaN)
	// through every sum, rate and mean computed from it, so the keys that depend on it go here.
	return slices.DeleteFunc(m, func(v vllm.Value) bool { return !finite(v.V) })
}

// unfinished is u over a pool of workers: each vLLM worker's increase of u's counter less that of
// its histogram's sum. A request in flight at either end of the step could have been counted in
// one and not the other (prefilled in the step before, finished in this one; prefilled in
// this one, finishing in the next), so the value is given only when every vLLM worker with
// the counter showed no request running or waiting on its page before the step and on its
// last page of it: every request it counted in the step then both started and ended in it, and
// those that did not finish are the difference, exactly. ok is false otherwise, and when no
// worker has the counter.
func unfinished(was []*workerAcc, u vllm.Unfinished) (float64, bool) {
	var v float64
	var any bool
	for _, wa := range was {
		if wa.kind != vllm.VLLM || !wa.has[u.Of] {
			continue
		}
		h := wa.hists[u.Less]
		if !wa.ends.set || wa.ends.start || wa.ends.end || h == nil || h.noSum {
			return 0, false
		}
		d := wa.totals[u.Of] - h.sum
		if !(d >= 0) { // a page whose counter and histogram disagree: nothing exact to give
			return 0, false
		}
		v, any = v+d, true
	}
	return v, any
}

// sumRatio is sr over a pool of workers: the increases of its histograms' sums, each summed over
// the workers, divided. Each worker with either histogram must have both, with sums, and equal
// count increases (vLLM leaves a request that set no max_tokens out of request_params_max_tokens
// only), so that the two sums are of the same requests; ok is false otherwise, and when the
// denominator did not rise.
func sumRatio(was []*workerAcc, sr vllm.SumRatio) (float64, bool) {
	var num, den float64
	for _, wa := range was {
		n, d := wa.hists[sr.Num], wa.hists[sr.Den]
		if n == nil && d == nil {
			continue
		}
		if n == nil || d == nil || n.noSum || d.noSum || n.count != d.count {
			return 0, false
		}
		num, den = num+n.sum, den+d.sum
	}
	if !(den > 0) || !finite(num) || !finite(den) {
		return 0, false
	}
	return num / den, true
}

// partsCover reports whether the parts of pt over a pool add up to the pool's whole
// (vllm.Part.Whole): every worker that counts the whole counts the parts too. A fleet with an
// engine older than the split family would otherwise get parts of some engines' whole.
func partsCover(was []*workerAcc, pt vllm.Part) bool {
	for _, wa := range was {
		if wa.has[pt.Whole] && !wa.has[pt.Of] {
			return false
		}
	}
	return true
}

// paired reports whether every worker of a pool that has rt's numerator on its page has its
// denominator too (see vllm.Ratio.Paired).
func paired(was []*workerAcc, rt vllm.Ratio) bool {
	for _, wa := range was {
		if wa.has[rt.Num] && !wa.has[rt.Den] {
			return false
		}
	}
	return true
}

// finite reports whether v is a number a float holds: not NaN, not ±Inf. A counter's increase
// or a sum of them that is not finite went beyond the float limit, and nothing computed from
// it is a value.
func finite(v float64) bool { return v-v == 0 }

// countsFinite reports whether a histogram's count and bucket counts are all finite.
func countsFinite(d *histAcc) bool {
	if !finite(d.count) {
		return false
	}
	for _, c := range d.counts {
		if !finite(c) {
			return false
		}
	}
	return true
}

// ratio computes rt from counter increases: absent when its numerator is not on the page or
// its denominator did not move.
func ratio(rt vllm.Ratio, totals *[vllm.NumCounters]float64, has *[vllm.NumCounters]bool) (float64, bool) {
	if !has[rt.Num] || vllm.Counters[rt.Num].Split != "" {
		return 0, false
	}
	return quotient(rt, totals[rt.Num], totals[rt.Den])
}

// quotient is rt of a numerator and a denominator, absent when the denominator did not move.
// When either is beyond the float limit (not finite) the ratio had a basis but has no value: it
// is NaN, and so is every statistic over it; a quotient beyond the limit is ±Inf. Callers keep
// only finite values as keys.
func quotient(rt vllm.Ratio, num, den float64) (float64, bool) {
	switch {
	case den <= 0:
		return 0, false
	case !finite(num) || !finite(den):
		return math.NaN(), true
	}
	return rt.Offset + num/den, true
}

// pool adds mean/max/p95 of the samples of all workers as statistics of name and label. The
// samples are pooled worker by worker, each worker's in scrape order, so that the mean adds
// them up in one order whatever the pool; buf is reused from one pool to the next. get appends
// a worker's samples to xs and returns it (a closure per worker to take them, as a callback,
// was most of a fleet's step-end allocations).
func pool(add func(name, label, stat string, v float64), name, label string, was []*workerAcc, buf *[]float64, get func(wa *workerAcc, xs []float64) []float64) {
	xs := (*buf)[:0]
	for _, wa := range was {
		xs = get(wa, xs)
	}
	*buf = xs
	if s, ok := summarize(xs); ok {
		for _, st := range vllm.IntervalStats {
			add(name, label, st, s.of(st))
		}
	}
}

func timeline(id WorkerID, wa *workerAcc) WorkerTimeline {
	wt := WorkerTimeline{WorkerID: id, Series: map[string][]Point{}}
	add := func(name string, s *series) {
		if s.v.len() == 0 {
			return
		}
		ps := make([]Point, 0, s.v.len())
		s.at.each(func(at int64) { ps = append(ps, Point{OffsetS: time.Duration(at).Seconds()}) })
		i := 0
		s.v.each(func(v float64) { ps[i].Value = v; i++ })
		// an increase beyond the float limit is no point
		if ps = slices.DeleteFunc(ps, func(p Point) bool { return !finite(p.Value) }); len(ps) > 0 {
			wt.Series[name] = ps
		}
	}
	for g, f := range vllm.Gauges[:vllm.NumKeyedGauges] {
		if f.Timeline {
			add(f.Name, &wa.gauges[g])
		}
	}
	for c, f := range vllm.Counters {
		if f.Timeline {
			add(f.Name, wa.delta(vllm.Counter(c)))
		}
	}
	for i, rt := range vllm.Ratios {
		if !rt.Timeline {
			continue
		}
		var ps []Point
		wa.eachRatio(i, func(at int64, v float64) {
			if finite(v) {
				ps = append(ps, Point{OffsetS: time.Duration(at).Seconds(), Value: v})
			}
		})
		if len(ps) > 0 {
			wt.Series[rt.Name] = ps
		}
	}
	return wt
}
