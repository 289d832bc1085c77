// Package page reads the Prometheus pages of inference engines (vLLM's, SGLang's): per worker,
// the samples of the families vllmstat reads (package vllm's spec), each family in the one
// spelling chosen for the page. ParsePage reads a page on its own; a Parser reads a target's
// successive pages, reusing what it learnt from the previous one. Limits bound what one page
// may hold, worker labels tell a page's workers apart, and Hint tells a target's user what its
// answer lacks.
//
// It is pure logic: no clock, no I/O. Package window turns successive pages into increases.
package page

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Page is what vllmstat keeps of one scrape: per worker, the samples of the families it reads,
// each family in the one spelling chosen for the page.
type Page struct {
	Engines []EnginePage // sorted by Engine, then Labels, then Kind
	// owner is set on a page a Parser may fill again once its reader releases it.
	owner *pageOwner
}

// EnginePage holds one worker's samples: one engine, told apart from the page's other engines by
// its engine label and by its worker labels (see Options.WorkerLabels, and the engine kind's
// own, vllm.EngineSpec.WorkerLabels). A target without an engine label has one EnginePage with
// Engine "" per set of worker labels and engine kind.
type EnginePage struct {
	// Kind is the engine kind whose families the samples are of.
	Kind   vllm.Engine
	Engine string
	// Labels are the worker labels the samples carry, as a series key sorted by name
	// (`ReplicaId="r1",WorkerId="w1"`; see LabelMap), "" when they carry none. Like engine, they
	// are not part of the series keys.
	Labels   string
	Gauges   [vllm.NumGauges]float64
	HasGauge [vllm.NumGauges]bool
	// SplitGauges holds, for a gauge family with a split label, its value by the label's value
	// (Gauges then holds the combined value of all its series), and for one with parts
	// (vllm.Family.Parts), its parts' values by the label's value; nil when the page has none.
	SplitGauges map[vllm.Gauge]map[string]float64
	Counters    []CounterSeries
	Hists       []HistSeries
	// Copy names the copy of the worker's figures that its ranked samples are of, when
	// processes of several ranks export copies of them (SGLang's TP and PP ranks; see
	// vllm.EngineSpec.RankLabels): the copy's rank labels as a series key
	// (`pp_rank="0",tp_rank="1"`), "" for a worker whose samples carry no ranks. A worker's page
	// reads the copy of its lowest ranks; Copies are the worker read from each of its other
	// copies on the page (its samples without ranks and that copy's), in rank order, nil when
	// it has one copy or none. A reader of successive pages keeps to one copy (see package
	// window's Worker.Pick): copies need not agree, and one may be missing from a page.
	Copy   string
	Copies []EnginePage
}

// Tokenizer reports whether ep is a worker of an engine kind whose processes carry ranks
// (SGLang) whose samples carry none: SGLang's tokenizer, which counts a server's tokens,
// requests and latencies beside its schedulers' DP ranks, and which Limits.MaxWorkers counts
// apart.
func (ep *EnginePage) Tokenizer() bool {
	return len(vllm.Engines[ep.Kind].RankLabels) > 0 && ep.Copy == ""
}

// CounterSeries is one series of a counter family: its labels other than engine identify it.
type CounterSeries struct {
	Family     vllm.Counter
	Key        string // the other labels, sorted and quoted: `finished_reason="stop",model_name="m"`
	Reason     string // the value of the family's split label (finished_reason for RequestSuccess)
	Value      float64
	Created    float64 // Unix seconds; valid when HasCreated
	HasCreated bool
	Ranked     bool // a series of the worker's copy (see EnginePage.Copy), not of its samples without ranks
}

// HistSeries is one series of a histogram family. Its Count is the _count sample, or the +Inf
// bucket's count when the page has no _count; a page without a +Inf bucket gets one holding
// _count, and a series with neither is not kept (the exposition format makes them equal).
type HistSeries struct {
	Family     vllm.Hist
	Key        string
	Buckets    []Bucket // cumulative, sorted by Le, +Inf last
	Sum, Count float64
	HasSum     bool // the page had a _sum sample; without it there is no mean
	Created    float64
	HasCreated bool
	Ranked     bool // as CounterSeries.Ranked
}

// Bucket is a cumulative histogram bucket.
type Bucket struct {
	Le    float64
	Count float64
}

// ParsePage parses an exposition page and keeps what vllmstat reads. A page that is not valid
// Prometheus or OpenMetrics text is an error, whatever it contains. It sets no limits and tells
// workers apart by DefaultWorkerLabels; see ParsePageOptions.
func ParsePage(body []byte) (*Page, error) { return parse(body, Options{}) }

func parse(body []byte, opt Options) (*Page, error) {
	raws, best, workers, err := collect(body, opt, nil)
	if err != nil {
		return nil, err
	}
	return assemble(raws, best, workers), nil
}

// chosen reports whether a sample belongs to the spelling read for its family.
func chosen(m meta, best [3][]int) bool {
	b := best[m.kind][m.slot()]
	if b == math.MaxInt {
		return false
	}
	if m.kind == kCounter {
		// a counter's value spellings rank 2*group and 2*group+1; its _created shares the group
		return m.group == b/2 && (m.role == rCreated || m.rank == b)
	}
	return m.rank == b
}

func assemble(raws []raw, best [3][]int, pageWorkers []workerKey) *Page {
	g := groupWorkers(pageWorkers)
	nv, base := g.views()
	n := base[len(g.keys)]
	// Each reported worker has a view per copy (one without copies), in rank order, numbered
	// from base: its samples without ranks go to every view, each copy's to its own.
	views := make([]*EnginePage, n)
	type hkey struct {
		fam vllm.Hist
		key string
	}
	hists := make([]map[hkey]*histAsm, n)
	type ckey struct {
		fam vllm.Counter
		key string
	}
	counters := make([]map[ckey]*CounterSeries, n)
	gaugeN := make([][vllm.NumGauges]int, n)
	type splitKey struct {
		view  int32
		g     vllm.Gauge
		value string
	}
	var splitN map[splitKey]int // series per split value, for averaged split gauges only
	// The parts of gauges with parts (vllm.Family.Parts), by view: nil while the page has none.
	var parts [][vllm.NumGauges]partAcc
	for g, f := range vllm.Gauges {
		for e := range vllm.NumEngines {
			if f.Split != "" && f.Combine == vllm.Mean && best[kGauge][int(e)*int(vllm.NumGauges)+g] != math.MaxInt {
				splitN = map[splitKey]int{}
			}
		}
	}
	add := func(v int32, r *raw, m *meta, ranked bool) {
		ep := views[v]
		if ep == nil {
			rw := g.of[r.worker]
			wk := g.keys[rw]
			ep = &EnginePage{Kind: wk.kind, Engine: wk.engine, Labels: wk.labels}
			if cs := g.copies; cs != nil && len(cs[rw]) > 0 {
				ep.Copy = pageWorkers[cs[rw][v-base[rw]]].rank.id
			}
			views[v] = ep
			hists[v] = map[hkey]*histAsm{}
			counters[v] = map[ckey]*CounterSeries{}
		}
		switch m.kind {
		case kGauge:
			g := vllm.Gauge(m.fam)
			part := m.parts && r.reason != ""
			if m.parts && !part {
				if parts == nil {
					parts = make([][vllm.NumGauges]partAcc, n)
				}
				parts[v][g].total = true // whatever its value: a total is read alone
			}
			if math.IsNaN(r.value) || math.IsInf(r.value, 0) {
				return // not a sample: it would make a mean, a max and a p95 disagree
			}
			if part {
				if parts == nil {
					parts = make([][vllm.NumGauges]partAcc, n)
				}
				parts[v][g].sum += r.value
				parts[v][g].n++
			} else {
				// Combined as the spec says: summed, or averaged below.
				ep.Gauges[g] += r.value
				ep.HasGauge[g] = true
				gaugeN[v][g]++
			}
			if m.split != "" && (!m.parts || part) {
				if ep.SplitGauges == nil {
					ep.SplitGauges = map[vllm.Gauge]map[string]float64{}
				}
				if ep.SplitGauges[g] == nil {
					ep.SplitGauges[g] = map[string]float64{}
				}
				ep.SplitGauges[g][r.reason] += r.value
				if vllm.Gauges[g].Combine == vllm.Mean {
					splitN[splitKey{v, g, r.reason}]++
				}
			}
		case kCounter:
			k := ckey{vllm.Counter(m.fam), r.key}
			cs := counters[v][k]
			if cs == nil {
				cs = &CounterSeries{Family: k.fam, Key: r.key, Reason: r.reason}
				counters[v][k] = cs
			}
			cs.Ranked = cs.Ranked || ranked
			if m.role == rCreated {
				if finite(r.value) { // a non-finite creation time says nothing
					cs.Created, cs.HasCreated = r.value, true
				}
			} else {
				cs.Value = r.value
			}
		case kHist:
			k := hkey{vllm.Hist(m.fam), r.key}
			h := hists[v][k]
			if h == nil {
				h = &histAsm{HistSeries: HistSeries{Family: k.fam, Key: r.key}}
				hists[v][k] = h
			}
			hs := &h.HistSeries
			hs.Ranked = hs.Ranked || ranked
			switch m.role {
			case rBucket:
				hs.Buckets = append(hs.Buckets, Bucket{Le: r.le, Count: r.value})
			case rSum:
				hs.Sum, hs.HasSum = r.value, true
			case rCount:
				hs.Count, h.hasCount = r.value, true
			case rCreated:
				if finite(r.value) {
					hs.Created, hs.HasCreated = r.value, true
				}
			}
		}
	}
	for i := range raws {
		r := &raws[i]
		m := &table.metas[r.meta]
		if !chosen(*m, best) {
			continue
		}
		rw := g.of[r.worker]
		from, to := base[rw], base[rw]+nv[rw]
		c := g.copy[r.worker]
		if c >= 0 {
			from += c
			to = from + 1
		}
		for v := from; v < to; v++ {
			add(v, r, m, c >= 0)
		}
	}
	for v, ep := range views {
		if ep == nil {
			continue // only samples of spellings not chosen
		}
		if parts != nil {
			for g, pa := range parts[v] {
				if !pa.total && pa.n > 0 { // the parts make the value only without a total
					ep.Gauges[g], ep.HasGauge[g], gaugeN[v][g] = pa.sum, true, pa.n
				}
			}
		}
		for g, n := range gaugeN[v] {
			if n > 1 && vllm.Gauges[g].Combine == vllm.Mean {
				ep.Gauges[g] /= float64(n)
				for val := range ep.SplitGauges[vllm.Gauge(g)] {
					ep.SplitGauges[vllm.Gauge(g)][val] /= float64(splitN[splitKey{int32(v), vllm.Gauge(g), val}])
				}
			}
		}
		for _, cs := range counters[v] {
			ep.Counters = append(ep.Counters, *cs)
		}
		slices.SortFunc(ep.Counters, func(a, b CounterSeries) int {
			return cmp.Or(cmp.Compare(a.Family, b.Family), strings.Compare(a.Key, b.Key))
		})
		for _, h := range hists[v] {
			if h.complete() {
				ep.Hists = append(ep.Hists, h.HistSeries)
			}
		}
		slices.SortFunc(ep.Hists, func(a, b HistSeries) int {
			return cmp.Or(cmp.Compare(a.Family, b.Family), strings.Compare(a.Key, b.Key))
		})
	}
	p := &Page{}
	for rw := range g.keys {
		var main *EnginePage
		for _, ep := range views[base[rw]:base[rw+1]] {
			switch {
			case ep == nil:
			case main == nil:
				main = ep
			default:
				main.Copies = append(main.Copies, *ep)
			}
		}
		if main != nil {
			p.Engines = append(p.Engines, *main)
		}
	}
	slices.SortFunc(p.Engines, func(a, b EnginePage) int {
		return cmp.Or(strings.Compare(a.Engine, b.Engine), strings.Compare(a.Labels, b.Labels), cmp.Compare(a.Kind, b.Kind))
	})
	return p
}

// partAcc adds up the parts of a gauge with parts on one worker (see vllm.Family.Parts).
type partAcc struct {
	sum   float64
	n     int
	total bool // the worker has a total series, which is its value alone
}

// histAsm is a histogram series being assembled from its samples.
type histAsm struct {
	HistSeries
	hasCount bool
}

// complete sorts the buckets and fills in the count or the +Inf bucket from the other, which the
// exposition format makes equal (expfmt takes a missing _count from +Inf too). It reports false
// for a series with neither: its count of observations is unknown.
func (h *histAsm) complete() bool {
	bs := h.Buckets
	slices.SortFunc(bs, func(a, b Bucket) int { return cmp.Compare(a.Le, b.Le) })
	hasInf := len(bs) > 0 && math.IsInf(bs[len(bs)-1].Le, 1)
	switch {
	case hasInf && !h.hasCount:
		h.Count = bs[len(bs)-1].Count
	case !hasInf && h.hasCount:
		h.Buckets = append(bs, Bucket{Le: math.Inf(1), Count: h.Count})
	case !hasInf:
		return false
	}
	return true
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
