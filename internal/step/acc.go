package step

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
	"github.com/vllmstat/vllmstat/internal/window"
)

// A step's figures are accumulated as its scrapes come in, worker by worker: each scrape's
// gauges and increases are added to the worker's share of the open step (workerAcc), and to its
// share of the open phase, so that the step's close only adds up the shares and computes keys
// from them. Which per-interval samples a share keeps is decided once (keep), from the keys the
// records will have: a fleet's open step holds thousands of shares.

// acc accumulates the open step.
type acc struct {
	ok, failed int
	workers    map[WorkerID]*workerAcc
}

// newAcc returns an empty accumulator, for a step or a phase.
func newAcc() *acc { return &acc{workers: map[WorkerID]*workerAcc{}} }

// worker returns the worker's share of a, made when new.
func (a *acc) worker(id WorkerID) *workerAcc {
	wa := a.workers[id]
	if wa == nil {
		wa = &workerAcc{}
		a.workers[id] = wa
	}
	return wa
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
