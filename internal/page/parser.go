package page

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/vllmstat/vllmstat/internal/expo"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Parser parses successive pages of one target, reusing what it learnt from the previous one:
// a target's pages nearly always have the same lines as its previous page, with other values.
// Such a page is read by comparing its lines with the previous page's (see expo.Shape) and
// writing its values into a Page of the same structure, without allocating once its reader
// releases the pages it is given (see Page.Release). A page whose lines are mostly the
// previous page's (series come and go) is read by resyncing on the previous page's lines: only
// its other lines are parsed, and only their samples decoded (see partial). Any other page is
// parsed in full.
//
// A Parser is not safe for concurrent use: it has one owner, the target's scrape goroutine.
type Parser struct {
	opt   Options
	shape expo.Shape
	prog  *program  // how to fill a page from the previous page's values; nil when there is none
	vals  []float64 // the values of the samples expo emits, in page order
	sums  []float64 // per split slot of prog, during fill
	tmpl  *template // the structure of the pages prog fills, shared with Parsers of pages alike
	// known is set when the previous page parsed: Resync may read the next one from its lines.
	known bool
	// kept is the previous page's raws for partial, nil when they did not fit keptRaws: then
	// they are read again from the page's lines.
	kept *keptRaws
	// partials counts the pages read by partial, for tests to tell which way a page went.
	partials int
	// replayed is set when the last Parse read the page by the previous page's lines.
	replayed bool
}

// NewParser returns a Parser that parses with opt, as ParsePageOptions does.
func NewParser(opt Options) *Parser { return &Parser{opt: opt} }

// Parse is ParsePageOptions(body, opt) with memory: the result is equal to what
// ParsePageOptions gives on the same body, and so is the error on a bad page. The page holds no
// reference to body, which the caller may reuse once Parse returns.
func (p *Parser) Parse(body []byte) (*Page, error) {
	p.replayed = false
	if p.prog != nil && p.shape.Replay(body, p.vals) && p.prog.fits(p.vals) {
		pg := p.take()
		p.prog.fill(pg, p.vals, p.sums)
		p.replayed = true
		return pg, nil
	}
	if p.known {
		if pg := p.partial(body); pg != nil {
			return pg, nil
		}
	}
	return p.full(body)
}

// Replayed reports whether the last Parse read its page by the previous page's lines: the
// page then had the previous page's sample lines, in order, up to their values (the same
// metric names and label sets), and was read without error.
func (p *Parser) Replayed() bool { return p.replayed }

// full parses body in full, and learns its structure for the next page.
func (p *Parser) full(body []byte) (*Page, error) {
	p.prog, p.tmpl, p.known, p.kept = nil, nil, false, nil
	raws, best, workers, err := collect(body, p.opt, &p.shape)
	if err != nil {
		return nil, err
	}
	return p.learn(raws, best, workers), nil
}

// partial reads a page whose lines are mostly the previous page's (see expo.Shape.Resync): a
// wanted sample on a line the previous page had is the previous page's raw with its new value
// and its worker numbered anew, and only the other samples are decoded. It returns nil when
// the page has an error, which full then reports as a full parse does; a page it reads gives
// the raws, ranks and workers full would (in the same order), so the same page.
func (p *Parser) partial(body []byte) *Page {
	old, oldWorkers := p.oldRaws()
	if old == nil {
		return nil
	}
	rd := newRawReader(p.opt, 0)
	rd.raws = make([]raw, 0, p.shape.Wanted()+p.shape.Wanted()/8)
	remap := make([]int32, len(oldWorkers)) // old worker number -> new, -1 before its first sample
	for i := range remap {
		remap[i] = -1
	}
	same := func(k int, v float64, line int) {
		rd.room(line)
		r := old(k)
		w := remap[r.worker]
		if w < 0 {
			w = rd.worker(oldWorkers[r.worker], line)
			remap[r.worker] = w
		}
		r.worker, r.value = w, v
		rd.keep(r)
	}
	if err := rd.run(func() error { return p.shape.Resync(body, tableSet, same, rd.sample) }); err != nil {
		return nil
	}
	p.prog, p.tmpl = nil, nil
	p.partials++
	return p.learn(rd.raws, rd.best, rd.wt.keys)
}

// oldRaws returns the previous page's raws, as a function of their index, and its workers; nil
// when they cannot be had.
func (p *Parser) oldRaws() (func(int) raw, []workerKey) {
	if p.kept != nil {
		return p.kept.raw, p.kept.workers
	}
	// Raws that did not fit keptRaws were not kept: the page's lines give them again, in the
	// order Resync numbers its samples.
	prev := newRawReader(Options{WorkerLabels: p.opt.WorkerLabels}, 0)
	prev.raws = make([]raw, 0, p.shape.Wanted())
	if prev.run(func() error { p.shape.Samples(tableSet, prev.sample); return nil }) != nil {
		return nil, nil
	}
	return func(k int) raw { return prev.raws[k] }, prev.wt.keys
}

// learn assembles the page of raws and remembers what the next parse reuses of it.
func (p *Parser) learn(raws []raw, best [3][]int, workers []workerKey) *Page {
	p.known = true // a page without wanted samples is remembered too
	p.kept = shareKept(keepRaws(raws, workers))
	pg := assemble(raws, best, workers)
	if p.prog = shareProgram(compile(raws, best, workers, pg)); p.prog != nil {
		if n := p.shape.Wanted(); cap(p.vals) < n {
			p.vals = make([]float64, n)
		}
		p.vals = p.vals[:p.shape.Wanted()]
		p.sums = make([]float64, len(p.prog.splits))
		p.tmpl = shareTemplate(pg)
		pg.owner = &pageOwner{tmpl: p.tmpl}
	}
	return pg
}

// take returns a released page of the current structure, or a new one.
// Its values are all written by fill (see template).
func (p *Parser) take() *Page { return p.tmpl.take() }

// pageOwner is the template of a page a Parser may fill again once its reader releases it, and
// whether it did.
type pageOwner struct {
	tmpl     *template
	released atomic.Bool
}

// Release hands a page back to be filled by a later parse, of its target or of another whose
// pages are alike: its reader must not read it any more (copy what must outlive it first). It
// may be called from another goroutine than the Parser's, once per page (a second call before a
// parse takes the page again does nothing). It does nothing on a page of ParsePage; a page
// never released is left to the garbage collector.
func (pg *Page) Release() {
	if pg != nil && pg.owner != nil && pg.owner.released.CompareAndSwap(false, true) {
		pg.owner.tmpl.put(pg)
	}
}

// clonePage copies the structure and values of a page, none of its storage shared.
func clonePage(src *Page) *Page {
	pg := &Page{Engines: slices.Clone(src.Engines)}
	for i := range pg.Engines {
		cloneEngine(&pg.Engines[i])
	}
	return pg
}

// cloneEngine gives ep storage of its own, its copies' too.
func cloneEngine(ep *EnginePage) {
	ep.Counters = slices.Clone(ep.Counters)
	ep.Hists = slices.Clone(ep.Hists)
	for j := range ep.Hists {
		ep.Hists[j].Buckets = slices.Clone(ep.Hists[j].Buckets)
	}
	if ep.SplitGauges != nil {
		m := make(map[vllm.Gauge]map[string]float64, len(ep.SplitGauges))
		for g, vs := range ep.SplitGauges {
			m[g] = maps.Clone(vs)
		}
		ep.SplitGauges = m
	}
	ep.Copies = slices.Clone(ep.Copies)
	for j := range ep.Copies {
		cloneEngine(&ep.Copies[j])
	}
}

// program fills a page of a known structure with the values of a page of the same lines: it
// does what assemble does with raws whose only change is their values, which assemble reads in
// two ways only (a gauge or _created value that is not finite is left out), so fits requires
// these finite, as they were on the page the program was made from. A program is never
// changed once compiled: Parsers of pages alike share one (see shareProgram).
type program struct {
	ops    []op    // one per emitted sample, in page order
	finite []int32 // the samples whose values must be finite
	gauges []gaugeSlot
	splits []splitSlot
	hists  []histFix
	// views are where the EnginePages that ops name are, on a page whose workers have copies
	// (EnginePage.Copies): ops name views, not engines. nil on any other page.
	views []viewRef
	// dups write the samples that go to several views (those without ranks of a worker with
	// copies), after ops, which writes each one's first.
	dups []dup
}

// viewRef is where an EnginePage is on a page: engine e, or its a-th copy (-1 for e itself).
type viewRef struct{ e, a int32 }

func (r viewRef) of(pg *Page) *EnginePage {
	if r.a < 0 {
		return &pg.Engines[r.e]
	}
	return &pg.Engines[r.e].Copies[r.a]
}

// dup is a write of sample k besides its op.
type dup struct {
	k int32
	o op
}

type opKind uint8

const (
	opSkip opKind = iota // a spelling not read, or a histogram series left out
	opGauge
	opPart // a gauge's part beside its total: its split slot only
	opCounter
	opCounterCreated
	opBucket
	opSum
	opCount
	opHistCreated
)

// op writes one sample's value: e is the engine's index in the page (the view's, on a page with
// views), i the gauge, counter or histogram's, j the bucket's or (for gauges) the split slot's,
// -1 for none.
type op struct {
	kind opKind
	e    int32
	i    int32
	j    int32
}

// gaugeSlot is one engine's gauge family: its value is the sum of its n samples, or their mean.
type gaugeSlot struct {
	e    int32
	g    vllm.Gauge
	n    int
	mean bool
}

// splitSlot is one value of a gauge's split label on one engine.
type splitSlot struct {
	e      int32
	g      vllm.Gauge
	reason string
	n      int  // samples with this value
	div    bool // divided by n: the family is averaged and the engine has several samples
}

// histFix completes a histogram series as histAsm.complete does.
type histFix struct {
	e, h         int32
	countFromInf bool // no _count: Count is the +Inf bucket
	infFromCount bool // no +Inf bucket: complete added one holding Count
	seen         bool // during compile: the series has samples
}

// compile returns the program that fills pg's structure from raws' successors, or nil where
// the structure hangs on more than names and labels: a value left out for not being finite,
// or two buckets of one series with one bound, whose order after sorting no bound tells.
func compile(raws []raw, best [3][]int, workers []workerKey, pg *Page) *program {
	pr := &program{ops: make([]op, len(raws))}
	g := groupWorkers(workers)
	nv, base := g.views()
	// The EnginePages the ops write, in page order: the page's engines, or on a page with
	// copies every view, engines and their copies; slot gives each view's (see assemble), -1
	// for a view assemble left out.
	var eps []*EnginePage
	copies := false
	for e := range pg.Engines {
		copies = copies || pg.Engines[e].Copies != nil
	}
	for e := range pg.Engines {
		for a := -1; a < len(pg.Engines[e].Copies); a++ {
			view := viewRef{int32(e), int32(a)}
			eps = append(eps, view.of(pg))
			if copies {
				pr.views = append(pr.views, view)
			}
		}
	}
	slot := make([]int32, base[len(g.keys)])
	for i := range slot {
		slot[i] = -1
	}
	for rw, wk := range g.keys {
		for e, ep := range eps {
			if ep.Engine != wk.engine || ep.Labels != wk.labels || ep.Kind != wk.kind {
				continue
			}
			v := base[rw]
			if cs := g.copies; cs != nil && len(cs[rw]) > 1 {
				for v < base[rw+1] && workers[cs[rw][v-base[rw]]].rank.id != ep.Copy {
					v++
				}
			}
			if v < base[rw+1] {
				slot[v] = int32(e)
			}
		}
	}
	// Slots by view and family, -1 for none yet; split slots are few and keyed by a map.
	gauges := make([]int32, len(eps)*int(vllm.NumGauges))
	for i := range gauges {
		gauges[i] = -1
	}
	type skey struct {
		e      int32
		g      vllm.Gauge
		reason string
	}
	var splits map[skey]int
	// The views' gauges with parts that have a total series, which is read alone.
	var totals map[skey]bool
	histBase := make([]int, len(eps)+1) // view e's series are fixes[histBase[e]:histBase[e+1]]
	for e, ep := range eps {
		histBase[e+1] = histBase[e] + len(ep.Hists)
	}
	fixes := make([]histFix, histBase[len(eps)])
	// each calls f with the slot of every view raw r's sample goes to.
	each := func(r *raw, f func(e int32) bool) bool {
		rw := g.of[r.worker]
		from, to := base[rw], base[rw]+nv[rw]
		if c := g.copy[r.worker]; c >= 0 {
			from += c
			to = from + 1
		}
		for v := from; v < to; v++ {
			if e := slot[v]; e >= 0 && !f(e) {
				return false
			}
		}
		return true
	}
	for i := range raws {
		r := &raws[i]
		if m := table.metas[r.meta]; m.parts && r.reason == "" && chosen(m, best) {
			each(r, func(e int32) bool {
				if totals == nil {
					totals = map[skey]bool{}
				}
				totals[skey{e: e, g: vllm.Gauge(m.fam)}] = true
				return true
			})
		}
	}
	for k := range raws {
		r := &raws[k]
		m := table.metas[r.meta]
		if !chosen(m, best) {
			continue
		}
		first := true
		ok := each(r, func(e int32) bool {
			ep := eps[e]
			o := op{e: e, j: -1}
			switch m.kind {
			case kGauge:
				if !finite(r.value) {
					return false
				}
				g := vllm.Gauge(m.fam)
				part := m.parts && r.reason != ""
				o.kind, o.i = opGauge, int32(g)
				if part && totals[skey{e: e, g: g}] {
					o.kind = opPart
				} else {
					gs := &gauges[int(e)*int(vllm.NumGauges)+int(g)]
					if *gs < 0 {
						*gs = int32(len(pr.gauges))
						pr.gauges = append(pr.gauges, gaugeSlot{e: e, g: g, mean: vllm.Gauges[g].Combine == vllm.Mean})
					}
					pr.gauges[*gs].n++
				}
				if m.split != "" && (!m.parts || part) {
					sk := skey{e, g, r.reason}
					if splits == nil {
						splits = map[skey]int{}
					}
					if _, ok := splits[sk]; !ok {
						splits[sk] = len(pr.splits)
						pr.splits = append(pr.splits, splitSlot{e: e, g: g, reason: r.reason})
					}
					o.j = int32(splits[sk])
					pr.splits[o.j].n++
				}
				if first {
					pr.finite = append(pr.finite, int32(k))
				}
			case kCounter:
				i, ok := slices.BinarySearchFunc(ep.Counters, r.key, func(cs CounterSeries, key string) int {
					return cmp.Or(cmp.Compare(cs.Family, vllm.Counter(m.fam)), strings.Compare(cs.Key, key))
				})
				if !ok {
					return false
				}
				o.kind, o.i = opCounter, int32(i)
				if m.role == rCreated {
					if !finite(r.value) {
						return false
					}
					o.kind = opCounterCreated
					if first {
						pr.finite = append(pr.finite, int32(k))
					}
				}
			case kHist:
				h, ok := slices.BinarySearchFunc(ep.Hists, r.key, func(hs HistSeries, key string) int {
					return cmp.Or(cmp.Compare(hs.Family, vllm.Hist(m.fam)), strings.Compare(hs.Key, key))
				})
				if !ok {
					return true // an incomplete series, left out whatever its values
				}
				hs := &ep.Hists[h]
				o.i = int32(h)
				fix := &fixes[histBase[e]+h]
				if !fix.seen {
					*fix = histFix{e: e, h: int32(h), countFromInf: true, infFromCount: true, seen: true}
				}
				switch m.role {
				case rBucket:
					o.kind = opBucket
					// Buckets are sorted by cmp.Compare of their bounds. Two bucket lines with one
					// bound (le="1" and le="1.0") are two buckets that sorting leaves in an order
					// no bound tells.
					j, _ := slices.BinarySearchFunc(hs.Buckets, r.le, func(b Bucket, le float64) int { return cmp.Compare(b.Le, le) })
					if j+1 < len(hs.Buckets) && cmp.Compare(hs.Buckets[j+1].Le, r.le) == 0 {
						return false
					}
					o.j = int32(j)
					if math.IsInf(r.le, 1) {
						fix.infFromCount = false
					}
				case rSum:
					o.kind = opSum
				case rCount:
					o.kind = opCount
					fix.countFromInf = false
				case rCreated:
					if !finite(r.value) {
						return false
					}
					o.kind = opHistCreated
					if first {
						pr.finite = append(pr.finite, int32(k))
					}
				}
			}
			if first {
				pr.ops[k], first = o, false
			} else {
				pr.dups = append(pr.dups, dup{k: int32(k), o: o})
			}
			return true
		})
		if !ok {
			return nil
		}
	}
	for i := range pr.splits {
		s := &pr.splits[i]
		gs := pr.gauges[gauges[int(s.e)*int(vllm.NumGauges)+int(s.g)]]
		s.div = gs.n > 1 && gs.mean
	}
	for _, f := range fixes {
		if f.seen && (f.countFromInf || f.infFromCount) {
			pr.hists = append(pr.hists, f)
		}
	}
	return pr
}

// fits reports whether vals leave the structure as it was: every value assemble could leave
// out is finite.
func (pr *program) fits(vals []float64) bool {
	for _, k := range pr.finite {
		if v := vals[k]; v-v != 0 { // NaN or ±Inf
			return false
		}
	}
	return true
}

// fill writes vals into pg, a page of the program's structure, as assemble would; sums holds
// the split slots' sums meanwhile.
func (pr *program) fill(pg *Page, vals, sums []float64) {
	for _, s := range pr.gauges {
		pr.engine(pg, s.e).Gauges[s.g] = 0
	}
	clear(sums)
	if pr.views == nil {
		for k, o := range pr.ops {
			if o.kind != opSkip {
				o.write(&pg.Engines[o.e], vals[k], sums)
			}
		}
	} else {
		for k, o := range pr.ops {
			if o.kind != opSkip {
				o.write(pr.views[o.e].of(pg), vals[k], sums)
			}
		}
		for _, d := range pr.dups {
			d.o.write(pr.views[d.o.e].of(pg), vals[d.k], sums)
		}
	}
	for _, s := range pr.gauges {
		if s.n > 1 && s.mean {
			pr.engine(pg, s.e).Gauges[s.g] /= float64(s.n)
		}
	}
	for i, s := range pr.splits {
		v := sums[i]
		if s.div {
			v /= float64(s.n)
		}
		pr.engine(pg, s.e).SplitGauges[s.g][s.reason] = v
	}
	for _, f := range pr.hists {
		hs := &pr.engine(pg, f.e).Hists[f.h]
		last := &hs.Buckets[len(hs.Buckets)-1]
		if f.countFromInf {
			hs.Count = last.Count
		} else if f.infFromCount {
			last.Count = hs.Count
		}
	}
}

// engine returns the EnginePage that the program's slots name e.
func (pr *program) engine(pg *Page, e int32) *EnginePage {
	if pr.views == nil {
		return &pg.Engines[e]
	}
	return pr.views[e].of(pg)
}

// write writes one sample's value v into ep, and its split slot's sum into sums.
func (o op) write(ep *EnginePage, v float64, sums []float64) {
	switch o.kind {
	case opGauge:
		ep.Gauges[o.i] += v
		if o.j >= 0 {
			sums[o.j] += v
		}
	case opPart:
		sums[o.j] += v
	case opCounter:
		ep.Counters[o.i].Value = v
	case opCounterCreated:
		ep.Counters[o.i].Created = v
	case opBucket:
		ep.Hists[o.i].Buckets[o.j].Count = v
	case opSum:
		ep.Hists[o.i].Sum = v
	case opCount:
		ep.Hists[o.i].Count = v
	case opHistCreated:
		ep.Hists[o.i].Created = v
	}
}
