package window

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/vllmstat/vllmstat/internal/expo"
)

// Page is what vllmstat keeps of one scrape: per engine, the samples of the families it reads,
// each family in the one spelling chosen for the page.
type Page struct {
	Engines []EnginePage // sorted by Engine
}

// EnginePage holds one engine's samples. A target without an engine label has one EnginePage
// with Engine "".
type EnginePage struct {
	Engine   string
	Gauges   [NumGauges]float64
	HasGauge [NumGauges]bool
	Counters []CounterSeries
	Hists    []HistSeries
}

// CounterSeries is one series of a counter family: its labels other than engine identify it.
type CounterSeries struct {
	Family     Counter
	Key        string // the other labels, sorted: "finished_reason=stop,model_name=m"
	Reason     string // finished_reason, for RequestSuccess
	Value      float64
	Created    float64 // Unix seconds; valid when HasCreated
	HasCreated bool
}

// HistSeries is one series of a histogram family.
type HistSeries struct {
	Family     Hist
	Key        string
	Buckets    []Bucket // cumulative, sorted by Le, +Inf last
	Sum, Count float64
	Created    float64
	HasCreated bool
}

// Bucket is a cumulative histogram bucket.
type Bucket struct {
	Le    float64
	Count float64
}

var table = buildNames()
var tableSet = expo.NewNames(table.names)

// raw is a sample kept during the first pass over a page, before spellings are chosen.
type raw struct {
	meta   int
	engine string
	key    string
	reason string
	le     float64
	value  float64
}

// ParsePage parses an exposition page and keeps what vllmstat reads. A page that is not valid
// Prometheus or OpenMetrics text is an error, whatever it contains.
func ParsePage(body []byte) (*Page, error) {
	raws := make([]raw, 0, len(body)/256) // about a third of a vLLM page's lines are kept
	var best [3][]int                     // lowest rank seen per kind and family
	best[kGauge] = fill(int(NumGauges))
	best[kCounter] = fill(int(NumCounters))
	best[kHist] = fill(int(NumHists))
	var bad error
	var kv []string
	var buf []byte
	keys := map[string]string{} // series keys repeat across a page's families: build each once
	err := expo.Parse(body, tableSet, func(s *expo.Sample) {
		m := table.metas[s.ID]
		r := raw{meta: s.ID, value: s.Value}
		kv = kv[:0]
		for _, l := range s.Labels {
			switch l.Name {
			case "engine":
				r.engine = l.Value
				continue
			case "le":
				if m.role == rBucket {
					le, err := strconv.ParseFloat(l.Value, 64)
					if err != nil && bad == nil {
						bad = fmt.Errorf("line %d: %s: invalid le %q", s.Line, s.Name, l.Value)
					}
					r.le = le
					continue
				}
			case "finished_reason":
				r.reason = l.Value
			}
			kv = append(kv, l.Name, l.Value)
		}
		if m.role == rBucket && !hasLabel(s.Labels, "le") && bad == nil {
			bad = fmt.Errorf("line %d: %s: bucket without le label", s.Line, s.Name)
		}
		sortPairs(kv)
		buf = buf[:0]
		for i := 0; i < len(kv); i += 2 {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, kv[i]...)
			buf = append(buf, '=')
			buf = append(buf, kv[i+1]...)
		}
		key, ok := keys[string(buf)]
		if !ok {
			key = string(buf)
			keys[key] = key
		}
		r.key = key
		if m.role != rCreated && m.rank < best[m.kind][m.fam] {
			best[m.kind][m.fam] = m.rank
		}
		raws = append(raws, r)
	})
	if err != nil {
		return nil, err
	}
	if bad != nil {
		return nil, bad
	}
	return assemble(raws, best), nil
}

func hasLabel(ls []expo.Label, name string) bool {
	for _, l := range ls {
		if l.Name == name {
			return true
		}
	}
	return false
}

func fill(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = math.MaxInt
	}
	return s
}

// chosen reports whether a sample belongs to the spelling read for its family.
func chosen(m meta, best [3][]int) bool {
	b := best[m.kind][m.fam]
	if b == math.MaxInt {
		return false
	}
	if m.kind == kCounter {
		// a counter's value spellings rank 2*group and 2*group+1; its _created shares the group
		return m.group == b/2 && (m.role == rCreated || m.rank == b)
	}
	return m.rank == b
}

func assemble(raws []raw, best [3][]int) *Page {
	byEngine := map[string]*EnginePage{}
	type hkey struct {
		fam Hist
		key string
	}
	hists := map[string]map[hkey]*HistSeries{}
	type ckey struct {
		fam Counter
		key string
	}
	counters := map[string]map[ckey]*CounterSeries{}
	gaugeN := map[string]*[NumGauges]int{}
	for _, r := range raws {
		m := table.metas[r.meta]
		if !chosen(m, best) {
			continue
		}
		ep := byEngine[r.engine]
		if ep == nil {
			ep = &EnginePage{Engine: r.engine}
			byEngine[r.engine] = ep
			hists[r.engine] = map[hkey]*HistSeries{}
			counters[r.engine] = map[ckey]*CounterSeries{}
			gaugeN[r.engine] = &[NumGauges]int{}
		}
		switch m.kind {
		case kGauge:
			g := Gauge(m.fam)
			// Running and waiting add up over series; KV usage is a fraction, so averaged.
			ep.Gauges[g] += r.value
			ep.HasGauge[g] = true
			gaugeN[r.engine][g]++
		case kCounter:
			k := ckey{Counter(m.fam), r.key}
			cs := counters[r.engine][k]
			if cs == nil {
				cs = &CounterSeries{Family: k.fam, Key: r.key, Reason: r.reason}
				counters[r.engine][k] = cs
			}
			if m.role == rCreated {
				cs.Created, cs.HasCreated = r.value, true
			} else {
				cs.Value = r.value
			}
		case kHist:
			k := hkey{Hist(m.fam), r.key}
			hs := hists[r.engine][k]
			if hs == nil {
				hs = &HistSeries{Family: k.fam, Key: r.key}
				hists[r.engine][k] = hs
			}
			switch m.role {
			case rBucket:
				hs.Buckets = append(hs.Buckets, Bucket{Le: r.le, Count: r.value})
			case rSum:
				hs.Sum = r.value
			case rCount:
				hs.Count = r.value
			case rCreated:
				hs.Created, hs.HasCreated = r.value, true
			}
		}
	}
	p := &Page{}
	for e, ep := range byEngine {
		if n := gaugeN[e][KVUsage]; n > 1 {
			ep.Gauges[KVUsage] /= float64(n)
		}
		for _, cs := range counters[e] {
			ep.Counters = append(ep.Counters, *cs)
		}
		sort.Slice(ep.Counters, func(i, j int) bool {
			a, b := ep.Counters[i], ep.Counters[j]
			return a.Family < b.Family || a.Family == b.Family && a.Key < b.Key
		})
		for _, hs := range hists[e] {
			sort.Slice(hs.Buckets, func(i, j int) bool { return hs.Buckets[i].Le < hs.Buckets[j].Le })
			ep.Hists = append(ep.Hists, *hs)
		}
		sort.Slice(ep.Hists, func(i, j int) bool {
			a, b := ep.Hists[i], ep.Hists[j]
			return a.Family < b.Family || a.Family == b.Family && a.Key < b.Key
		})
		p.Engines = append(p.Engines, *ep)
	}
	sort.Slice(p.Engines, func(i, j int) bool { return p.Engines[i].Engine < p.Engines[j].Engine })
	return p
}

// sortPairs sorts name, value pairs by name; pages list labels sorted already, so this is
// usually one pass.
func sortPairs(kv []string) {
	for i := 2; i < len(kv); i += 2 {
		for j := i; j >= 2 && kv[j] < kv[j-2]; j -= 2 {
			kv[j], kv[j-2] = kv[j-2], kv[j]
			kv[j+1], kv[j-1] = kv[j-1], kv[j+1]
		}
	}
}
