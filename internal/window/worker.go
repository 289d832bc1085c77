// Package window turns the successive pages of an inference engine's worker (package page) into
// windowed values: counter increases that survive engine restarts, and histogram bucket
// increases, with the reset and non-finite sample rules of Observe.
//
// It is pure logic: no clock, no I/O. The step package pools its output per training step.
package window

import (
	"math"
	"slices"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Worker keeps what one engine's previous successful scrape said, to turn the next one into
// increases. A Worker is owned by one goroutine.
type Worker struct {
	seen   bool
	absent bool   // known not to have been there before its first page (see Absent)
	pages  uint64 // the pages observed, numbering them from 1
	// Every series the worker's pages have shown, kept while the worker is: one that leaves a
	// page and comes back goes on from its last value.
	counters map[seriesID]*counterState
	hists    map[seriesID]*histState
	// The states of the previous page's series, in its order: a worker's page nearly always
	// has the same series in the same order as its previous one (a page.Parser hands out pages of
	// one structure, whose keys are the same strings), so they are found by position instead
	// of by key.
	counterLayout layout[counterState]
	histLayout    layout[histState]
	// What Observe returns the increases in, reused from one call to the next.
	s *Scratch
	// copy is the copy of the worker's figures it reads (page.EnginePage.Copy), "" before
	// any: see Pick.
	copy string
}

// Scratch is where Observe writes the histograms and shares of the Increases it returns, reused
// from one call to the next. Workers that one goroutine observes one after another may share
// one (NewWorkerSharing): each worker's own was a third of what it kept, its histograms'
// buckets written at every scrape and read only until the next.
type Scratch struct {
	deltas [vllm.NumHists]HistDelta
	delta  HistDelta // one series' increase, when its family has several
	shares [vllm.NumCounters][]Share
	bounds boundsTable
}

// layout is the series of a worker's previous page, in order, and their states.
type layout[S any] struct {
	ids    []seriesID
	states []*S
}

// learn makes l the layout of a page of n series, the i-th named by id(i), and returns their
// states, in order: from byID, where a series not seen before gets a state made by fresh(i).
func (l *layout[S]) learn(n int, id func(int) seriesID, byID map[seriesID]*S, fresh func(int) *S) []*S {
	l.ids, l.states = l.ids[:0], l.states[:0]
	for i := range n {
		k := id(i)
		st := byID[k]
		if st == nil {
			st = fresh(i)
			byID[k] = st
		}
		l.ids = append(l.ids, k)
		l.states = append(l.states, st)
	}
	return l.states
}

// sameCounters reports whether a page's counter series are those of ids, in order. Their keys
// are usually the very strings of ids, which compare at once.
func sameCounters(ids []seriesID, cs []page.CounterSeries) bool {
	if len(ids) != len(cs) {
		return false
	}
	for i := range cs {
		if ids[i].fam != int(cs[i].Family) || ids[i].key != cs[i].Key {
			return false
		}
	}
	return true
}

// sameHists is sameCounters for histogram series.
func sameHists(ids []seriesID, hs []page.HistSeries) bool {
	if len(ids) != len(hs) {
		return false
	}
	for i := range hs {
		if ids[i].fam != int(hs[i].Family) || ids[i].key != hs[i].Key {
			return false
		}
	}
	return true
}

// seriesID names a series of one worker: its family and its other labels.
type seriesID struct {
	fam int
	key string
}

// counterState is what a worker knows of one counter series. A series that has shown no finite
// value since it appeared, or since its worker restarted, has no baseline (base false): its next
// finite value counts whole if whole is set or its _created is after since, and is only a
// baseline otherwise (a quiet one when copied is set: see Pick). ranked marks a series of the
// worker's copy; at is the worker's page that showed value.
type counterState struct {
	value, created float64
	hasCreated     bool
	base           bool
	whole          bool
	ranked, copied bool
	since          float64
	at             uint64
}

// histState keeps a histogram's bucket counts beside its bounds, which come from the scratch's
// table and are shared by every series of that layout (see boundsTable).
type histState struct {
	bounds     []float64
	counts     []float64
	sum, count float64
	created    float64
	hasCreated bool
	hasSum     bool
	base       bool // as in counterState
	whole      bool
	ranked     bool
	copied     bool
	since      float64
	at         uint64
}

// Increase is what changed in one engine between its previous successful scrape and this one.
// Its shares and histograms are in the scratch of the Worker that returned it, and hold until
// the next Observe of a Worker with that scratch: copy what must outlive it.
type Increase struct {
	Counters   [vllm.NumCounters]float64
	HasCounter [vllm.NumCounters]bool // the family was on the page and an increase could be computed
	// Shares holds the increases of each family with a split label, by the label's value:
	// each value once, in the order of the page (a reader goes through a slice faster than
	// through a map).
	Shares [vllm.NumCounters][]Share
	Hists  [vllm.NumHists]*HistDelta
	// Undated is set on a worker's first scrape when a series already had counts but no
	// _created: they are a baseline, though they may have been made after the moment since,
	// which a page without _created cannot tell.
	Undated bool
	// Restarted is set when the page shows that the worker's process restarted since its last
	// page: a series with a baseline went down, or its _created changed (see Observe). The
	// increases count from zero already; this says that it happened, for whoever reports it.
	Restarted bool
}

// Success returns the increases of request_success by finished_reason, nil if none.
func (inc *Increase) Success() map[string]float64 {
	sh := inc.Shares[vllm.RequestSuccess]
	if len(sh) == 0 {
		return nil
	}
	m := make(map[string]float64, len(sh))
	for _, s := range sh {
		m[s.Value] = s.Inc
	}
	return m
}

// Share is the increase of the series of a family with a split label that have one value of it.
type Share struct {
	Value string
	Inc   float64
}

// HistDelta is the increase of a histogram: cumulative bucket counts, sum and count.
type HistDelta struct {
	Buckets []page.Bucket
	// Bounds holds the buckets' upper bounds in a slice shared by the histograms of that layout,
	// which nobody writes: an accumulator may keep it rather than a copy. Observe sets it; nil
	// when not known.
	Bounds     []float64
	Sum, Count float64
	NoSum      bool // a series without _sum took part: Sum is not the sum of the observations
}

// NewWorker returns a worker that has seen nothing yet, with a scratch of its own.
func NewWorker() *Worker { return NewWorkerSharing(&Scratch{}) }

// NewWorkerSharing returns a worker that has seen nothing yet and writes the increases it returns
// in s.
func NewWorkerSharing(s *Scratch) *Worker {
	return &Worker{counters: map[seriesID]*counterState{}, hists: map[seriesID]*histState{}, s: s}
}

// Absent tells a worker that has observed nothing yet that there is evidence it was not there
// before its first page (its target's earlier pages did not show it, or its target's server
// refused every connection until then): all of that page's counts were made since, and count
// whole, as a series new on a worker seen before does.
func (w *Worker) Absent() { w.absent = true }

// Pick returns the EnginePage of p that the worker reads: p itself, or one of p.Copies. Where
// processes of several ranks export copies of a worker's figures (SGLang's TP and PP ranks), a
// worker keeps to the copy it first read, the lowest ranks' (p's own), for as long as a page
// has it: copies need not agree (their processes may have started apart), and reading another
// at each scrape would turn their differences into counts. When its copy is missing from a page
// that has others, it reads p's own, whose series Observe starts as a baseline.
func (w *Worker) Pick(p *page.EnginePage) *page.EnginePage {
	if w.copy == "" || p.Copy == w.copy || p.Copies == nil {
		return p
	}
	for i := range p.Copies {
		if p.Copies[i].Copy == w.copy {
			return &p.Copies[i]
		}
	}
	return p
}

// switchCopy makes the copy of p (see Pick) the worker's own, and reports whether it had another
// one, whose series are then forgotten: a copy's counts are not another's, and the new copy's
// series start as a baseline, counting nothing until its next scrape.
func (w *Worker) switchCopy(p *page.EnginePage) bool {
	if p.Copy == "" || p.Copy == w.copy {
		return false
	}
	had := w.copy != ""
	w.copy = p.Copy
	if !had {
		return false
	}
	for id, st := range w.counters {
		if st.ranked {
			delete(w.counters, id)
		}
	}
	for id, st := range w.hists {
		if st.ranked {
			delete(w.hists, id)
		}
	}
	w.counterLayout.ids, w.histLayout.ids = w.counterLayout.ids[:0], w.histLayout.ids[:0]
	return true
}

// Observe takes an engine's samples from a successful scrape and returns the increases since the
// previous one. A worker seen for the first time contributes only the series whose _created is
// after since (Unix seconds): the engine started after that moment, so all of its count is new;
// otherwise its first scrape is only the baseline, unless the worker is known Absent before it.
// A series that appears on a worker seen before started from zero, and all of it counts.
//
// A counter that went down, or whose _created changed, was reset by an engine restart, and its
// increase is the new value (what Prometheus' increase() does, plus the _created check that
// catches a restart whose counter has already passed its old value). Never clamped to zero.
// On pages without _created (vLLM in multiprocess mode, SGLang, simulators) a counter going
// down is the only sign of a restart, and the restart is the worker's process': every series
// of the page without _created restarted with it (see restart), including one that a restart
// no scrape saw left above its old value.
//
// A histogram is reset as a whole when any of its _bucket, _sum and _count series went down
// (each follows the counter rule), its _created changed or its bucket layout changed; its
// increase is then its new values. So no bucket, sum or count increase is ever negative. _sum
// could go down without a reset only through negative observations, which vLLM's latencies never
// are.
//
// A NaN or ±Inf value is no value: the series is absent from this scrape, its last finite value
// stays the baseline, and the increase lands when a finite value returns (a finite value below
// the last one is a reset, as always). Prometheus' increase() sees every finite value after
// +Inf as a reset, and counts a whole counter again after a single non-finite sample. A
// histogram series with any non-finite _bucket, _sum or _count sits out as a whole.
//
// A page of another copy of the worker's figures than the previous one's (see Pick) starts the
// copy's series anew, each as a baseline: the increase between the two copies' values is no
// count, and neither is what they differ by.
func (w *Worker) Observe(p *page.EnginePage, since float64) Increase {
	var inc Increase
	first := !w.seen && !w.absent
	w.seen = true
	w.pages++
	switched := w.switchCopy(p)
	for c := range w.s.shares {
		w.s.shares[c] = w.s.shares[c][:0]
	}
	cstates := w.counterLayout.states
	if !sameCounters(w.counterLayout.ids, p.Counters) {
		cstates = w.counterLayout.learn(len(p.Counters), func(i int) seriesID { return seriesID{int(p.Counters[i].Family), p.Counters[i].Key} },
			w.counters, func(i int) *counterState {
				r := p.Counters[i].Ranked
				return &counterState{whole: !first && !(switched && r), since: since, ranked: r, copied: switched && r}
			})
	}
	hstates := w.histLayout.states
	if !sameHists(w.histLayout.ids, p.Hists) {
		hstates = w.histLayout.learn(len(p.Hists), func(i int) seriesID { return seriesID{int(p.Hists[i].Family), p.Hists[i].Key} },
			w.hists, func(i int) *histState {
				r := p.Hists[i].Ranked
				return &histState{whole: !first && !(switched && r), since: since, ranked: r, copied: switched && r}
			})
	}
	inc.Restarted = w.restart(p, cstates, hstates)
	for i := range p.Counters {
		cs := &p.Counters[i]
		st := cstates[i]
		old := *st
		if !finite(cs.Value) {
			continue
		}
		*st = counterState{value: cs.Value, created: cs.Created, hasCreated: cs.HasCreated, base: true, ranked: old.ranked, at: w.pages}
		var d float64
		switch {
		case old.copied:
			continue // the first value of a copy read after another: a baseline
		case !old.base:
			if !old.whole && (!cs.HasCreated || cs.Created <= old.since) {
				inc.Undated = inc.Undated || !cs.HasCreated && cs.Value > 0
				continue
			}
			d = cs.Value
		case cs.Value < old.value || cs.HasCreated && old.hasCreated && cs.Created != old.created:
			d = cs.Value
			inc.Restarted = true
		default:
			d = cs.Value - old.value
		}
		inc.Counters[cs.Family] += d
		inc.HasCounter[cs.Family] = true
		if vllm.Counters[cs.Family].Split != "" {
			w.share(cs.Family, cs.Reason, d)
		}
	}
	for i := range p.Hists {
		hs := &p.Hists[i]
		old := hstates[i]
		if !finiteHist(hs) {
			continue
		}
		// The family's first series' increase is the family's so far; a later one's is added
		// to it.
		acc := inc.Hists[hs.Family]
		d := &w.s.deltas[hs.Family]
		if acc != nil {
			d = &w.s.delta
		}
		// The counts are copied into the state's own slice: the page is handed back to its
		// parser after Observe (page.Page.Release) and its buckets are overwritten by the next scrape.
		switch {
		case old.copied: // the first value of a copy read after another: a baseline
			d = nil
			w.keep(old, hs)
		case !old.base:
			if old.whole || hs.HasCreated && hs.Created > old.since {
				fullHist(d, hs)
			} else {
				inc.Undated = inc.Undated || !hs.HasCreated && hs.Count > 0
				d = nil
			}
			w.keep(old, hs)
		case histReset(old, hs):
			fullHist(d, hs)
			w.keep(old, hs)
			// a new layout or format alone is a reset of the counts, not a sign of a restart
			inc.Restarted = inc.Restarted || hs.HasCreated && old.hasCreated && hs.Created != old.created || histDown(old, hs)
		default: // the same layout as the state's, so the copy is made with the increase
			*d = HistDelta{Sum: hs.Sum - old.sum, Count: hs.Count - old.count, Buckets: slices.Grow(d.Buckets[:0], len(hs.Buckets))[:len(hs.Buckets)], NoSum: !hs.HasSum}
			counts := old.counts
			for j, b := range hs.Buckets {
				d.Buckets[j] = page.Bucket{Le: b.Le, Count: b.Count - counts[j]}
				counts[j] = b.Count
			}
		}
		if d != nil {
			d.Bounds = old.bounds
		}
		old.sum, old.count, old.created, old.hasCreated, old.hasSum = hs.Sum, hs.Count, hs.Created, hs.HasCreated, hs.HasSum
		old.base, old.whole, old.copied, old.since, old.at = true, false, false, 0, w.pages
		switch {
		case d == nil:
		case acc == nil:
			inc.Hists[hs.Family] = d
		default:
			AddHist(acc, d)
			if acc.Bounds == nil { // the family's series had other layouts, merged
				acc.Bounds = w.s.bounds.of(acc.Buckets)
			}
		}
	}
	for c, sh := range w.s.shares {
		if len(sh) > 0 {
			inc.Shares[c] = sh
		}
	}
	return inc
}

// keep makes hs's buckets the state's: its counts copied, its bounds from the scratch's table
// unless they are the state's already.
func (w *Worker) keep(st *histState, hs *page.HistSeries) {
	if !boundsOf(st.bounds, hs.Buckets) {
		st.bounds = w.s.bounds.of(hs.Buckets)
	}
	st.counts = slices.Grow(st.counts[:0], len(hs.Buckets))[:len(hs.Buckets)]
	for j, b := range hs.Buckets {
		st.counts[j] = b.Count
	}
}

// share adds d to the share of value in family c's shares, added if new. A family has few
// values, and they come in the same order from scrape to scrape: a scan finds them.
func (w *Worker) share(c vllm.Counter, value string, d float64) {
	sh := w.s.shares[c]
	for i := range sh {
		if sh[i].Value == value {
			sh[i].Inc += d
			return
		}
	}
	sh = append(sh, Share{Value: value})
	sh[len(sh)-1].Inc += d // from 0, as a sum does, which turns a -0 into 0
	w.s.shares[c] = sh
}

// restart applies the rule of pages without _created: a series without _created whose value
// went down means that the worker's process restarted since that series' last value, and every
// series of the page without _created restarted with it. Each of them whose last value came no
// later than the last value of a series that went down (so before the restart) loses its
// baseline, and counts whole from this page's value, or from its next finite one. A series shown
// after that may have been shown after the restart already: it keeps its baseline, and goes by
// its own values; so does a series absent from the page, which shows a restart by going down
// when it is back. Series with _created go by their own _created, which is exact. It reports
// whether a series went down.
func (w *Worker) restart(p *page.EnginePage, cstates []*counterState, hstates []*histState) bool {
	var before uint64 // the restart came after this page
	down := false
	for i := range p.Counters {
		cs, st := &p.Counters[i], cstates[i]
		// v-v == 0 keeps out NaN and ±Inf (-Inf is below everything).
		if st.base && !st.hasCreated && !cs.HasCreated && cs.Value-cs.Value == 0 && cs.Value < st.value {
			down, before = true, max(before, st.at)
		}
	}
	for i := range p.Hists {
		hs, st := &p.Hists[i], hstates[i]
		if st.base && !st.hasCreated && !hs.HasCreated && finiteHist(hs) && histDown(st, hs) {
			down, before = true, max(before, st.at)
		}
	}
	if !down {
		return false
	}
	for i, st := range cstates {
		if st.base && !st.hasCreated && !p.Counters[i].HasCreated && st.at <= before {
			st.base, st.whole = false, true
		}
	}
	for i, st := range hstates {
		if st.base && !st.hasCreated && !p.Hists[i].HasCreated && st.at <= before {
			st.base, st.whole = false, true
		}
	}
	return true
}

// histDown reports whether any of a histogram's values went down between its old state and hs:
// its _count, its _sum, or a bucket of an unchanged layout.
func histDown(old *histState, hs *page.HistSeries) bool {
	if hs.Count < old.count || hs.Sum < old.sum {
		return true
	}
	if len(hs.Buckets) != len(old.bounds) {
		return false
	}
	for j, b := range hs.Buckets {
		if b.Le == old.bounds[j] && b.Count < old.counts[j] {
			return true
		}
	}
	return false
}

// histReset reports whether a histogram was reset between its old state and hs: its _created
// changed, its layout changed or any of its counters went down.
func histReset(old *histState, hs *page.HistSeries) bool {
	if hs.HasCreated && old.hasCreated && hs.Created != old.created || hs.HasSum != old.hasSum ||
		hs.Count < old.count || hs.Sum < old.sum || len(hs.Buckets) != len(old.bounds) {
		return true
	}
	for j, b := range hs.Buckets {
		if b.Le != old.bounds[j] || b.Count < old.counts[j] {
			return true
		}
	}
	return false
}

// finiteHist reports whether every value of a histogram series is finite.
func finiteHist(hs *page.HistSeries) bool {
	// v-v is 0 for a finite v and NaN for a NaN or ±Inf: one test per value.
	if hs.Sum-hs.Sum != 0 || hs.Count-hs.Count != 0 {
		return false
	}
	for _, b := range hs.Buckets {
		if b.Count-b.Count != 0 {
			return false
		}
	}
	return true
}

// fullHist sets d to all of hs, in d's own slice; its Bounds are the caller's to set.
func fullHist(d *HistDelta, hs *page.HistSeries) {
	*d = HistDelta{Sum: hs.Sum, Count: hs.Count, Buckets: append(d.Buckets[:0], hs.Buckets...), NoSum: !hs.HasSum}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func sameLayout(a, b []page.Bucket) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Le != b[i].Le {
			return false
		}
	}
	return true
}

// AddHist adds d into acc, by bucket bound. Buckets of one layout are added in place, so that
// a histogram's increases add up without allocating while its layout stays put.
func AddHist(acc, d *HistDelta) {
	acc.Sum += d.Sum
	acc.Count += d.Count
	acc.NoSum = acc.NoSum || d.NoSum
	if sameLayout(acc.Buckets, d.Buckets) {
		for i := range acc.Buckets {
			acc.Buckets[i].Count += d.Buckets[i].Count
		}
		return
	}
	acc.Buckets = MergeBuckets(acc.Buckets, d.Buckets)
	acc.Bounds = nil
}

// MergeBuckets adds two cumulative bucket lists by upper bound. A bound missing from one list
// takes that list's count at the next lower bound (the cumulative count there), so merging
// histograms with different layouts stays cumulative.
func MergeBuckets(a, b []page.Bucket) []page.Bucket {
	if sameLayout(a, b) {
		out := make([]page.Bucket, len(a))
		for i := range a {
			out[i] = page.Bucket{Le: a[i].Le, Count: a[i].Count + b[i].Count}
		}
		return out
	}
	out := make([]page.Bucket, 0, len(a)+len(b))
	i, j := 0, 0
	var ca, cb float64 // cumulative counts at the last bound passed in each list
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || i < len(a) && a[i].Le < b[j].Le:
			ca = a[i].Count
			out = append(out, page.Bucket{Le: a[i].Le, Count: ca + cb})
			i++
		case i >= len(a) || b[j].Le < a[i].Le:
			cb = b[j].Count
			out = append(out, page.Bucket{Le: b[j].Le, Count: ca + cb})
			j++
		default:
			ca, cb = a[i].Count, b[j].Count
			out = append(out, page.Bucket{Le: a[i].Le, Count: ca + cb})
			i++
			j++
		}
	}
	return out
}
