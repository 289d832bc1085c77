package report

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// group is one report group of charts, as package vllm names and orders the groups.
type group struct {
	Name   string  `json:"name"`
	Charts []chart `json:"charts"`
}

// chart is one chart of step metrics: the keys it draws and how it is labelled.
type chart struct {
	// ID names the chart by its keys: their name without prefix and statistic ("prefix_cache_hit_rate",
	// "generation_tokens per interval"). The page keeps it as the figure's data-chart.
	ID string `json:"id"`
	// Title and Unit are the spec's title of the family and the unit of the chart's values; an
	// unknown key is its own title and has no unit.
	Title string `json:"title"`
	Unit  string `json:"unit,omitempty"`
	// Frac marks values in 0..1.
	Frac bool  `json:"frac,omitempty"`
	Keys []int `json:"keys"` // indexes into pageData.Keys
	// Kind is how the page draws the chart: "" lines, chartStack the engine-seconds stacked
	// by state, chartStates lines in the states' colours.
	Kind string `json:"kind,omitempty"`
	// Names name the lines of keys whose names their statistics do not give (the ledger's
	// states, the trainer's and the engines' versions), by the whole step's key.
	Names map[string]string `json:"names,omitempty"`
}

// groupOf names the group of a key without its prefix: the fleet balance for the step's
// balance keys, else the group package vllm gives its family.
func groupOf(v vllm.Value) string {
	if isBalance(v) {
		return vllm.GroupBalance
	}
	if _, ok := computeDescribed[v.Name]; ok {
		return vllm.GroupThroughput
	}
	return cmp.Or(vllm.Group(v.Name), vllm.GroupOther)
}

// chartOf names the chart of a key without its prefix: its name (and split label's value)
// without the statistic, so that e.g. p50, p95 and p99 share a chart, and a family's finish
// reasons share one. A worst worker's value keeps its chart of its own.
func chartOf(v vllm.Value) string {
	switch {
	case v.Stat == vllm.WorstWorker:
		return v.Name + "/" + v.Stat
	case v.Stat != "" && v.Label != "":
		return v.Name + "/" + v.Label
	}
	return v.Name
}

// perInterval ends the ID of the chart of a counter's per-interval statistics, apart from its
// step total's.
const perInterval = " per interval"

// The kinds of name a chart can be of, which decide how the spec's unit reads on it.
type kind uint8

const (
	kindOther kind = iota
	kindGauge
	kindCounter
	kindHist
	kindRatio
	kindRate
)

// described is what the page says about the values of one name: the spec's title, the unit
// of one sample (a gauge's value, a counter's increase in an interval, a ratio) and whether
// the values are fractions.
type described struct {
	title, unit string
	frac        bool
	kind        kind
	// rank orders the charts within a group: the seed's metrics first, then as the spec lists
	// the names.
	rank int
}

// seedNames are the figures vllmstat began with, which lead their groups: the prefix-cache
// hit rate, preemptions, KV-cache usage and the running and waiting requests.
var seedNames = []string{
	vllm.PrefixHitRate.Name,
	vllm.Counters[vllm.Preemptions].Name,
	vllm.Gauges[vllm.KVUsage].Name,
	vllm.Gauges[vllm.Running].Name,
	vllm.Gauges[vllm.Waiting].Name,
}

// balanceDescribed are the fleet-balance figures, which the step package adds beside the
// spec's families.
var balanceDescribed = map[string]described{
	step.NameStragglerTail: {title: "Straggler tail", unit: "seconds behind the median worker"},
	step.NameFleetBusy:     {title: "Fleet busy time", unit: "seconds"},
	step.NameWorkerIdle:    {title: "Worker idle fraction", unit: "fraction of the covered time (0–1)", frac: true},
	step.NameWorkerAsleep:  {title: "Worker asleep fraction", unit: "fraction of the covered time (0–1)", frac: true},
	step.KeyImbalance:      {title: "Generation imbalance", unit: "busiest worker's tokens / mean"},
}

// computeDescribed are the compute keys, which the step package derives from the engines'
// estimates; they are charted with the throughput.
var computeDescribed = map[string]described{
	step.NameTFLOPS:           {title: "Achieved TFLOP/s per GPU", unit: "TFLOP/s over the step"},
	step.NameTFLOPSGenerating: {title: "Achieved TFLOP/s per GPU while generating", unit: "TFLOP/s over the generating time"},
	step.NameReadGBps:         {title: "Memory read per GPU", unit: "GB/s over the step"},
	step.NameWriteGBps:        {title: "Memory written per GPU", unit: "GB/s over the step"},
	step.NameMFU:              {title: "MFU", unit: "achieved / peak TFLOP/s (0–1)", frac: true},
	step.NameMFUGenerating:    {title: "MFU while generating", unit: "achieved / peak TFLOP/s (0–1)", frac: true},
	step.NameMBU:              {title: "MBU", unit: "bytes read and written / peak bandwidth (0–1)", frac: true},
}

// specNames describes every name the spec gives a title, by name.
var specNames = func() map[string]described {
	m := map[string]described{}
	add := func(name string, d described) {
		if _, ok := m[name]; ok {
			return
		}
		d.rank = len(m)
		m[name] = d
	}
	family := func(name string) (described, bool) {
		for _, f := range vllm.Gauges {
			if f.Name == name {
				return described{title: f.Title, unit: f.Unit, frac: f.Fraction, kind: kindGauge}, true
			}
		}
		for _, f := range vllm.Counters {
			if f.Name == name {
				return described{title: f.Title, unit: f.Unit, frac: f.Fraction, kind: kindCounter}, true
			}
		}
		for _, r := range vllm.Ratios {
			if r.Name == name {
				return described{title: r.Title, unit: r.Unit, frac: r.Fraction, kind: kindRatio}, true
			}
		}
		return described{}, false
	}
	for _, name := range seedNames {
		if d, ok := family(name); ok {
			add(name, d)
		}
	}
	for _, r := range vllm.Rates {
		f := vllm.Counters[r.Of]
		add(r.Name(), described{title: f.Title + " per second", unit: strings.TrimSuffix(f.Unit, perInterval) + " per second", kind: kindRate})
	}
	for _, r := range vllm.Ratios {
		add(r.Name, described{title: r.Title, unit: r.Unit, frac: r.Fraction, kind: kindRatio})
	}
	for _, f := range vllm.Gauges {
		add(f.Name, described{title: f.Title, unit: f.Unit, frac: f.Fraction, kind: kindGauge})
	}
	for _, f := range vllm.Counters {
		add(f.Name, described{title: f.Title, unit: f.Unit, frac: f.Fraction, kind: kindCounter})
	}
	for _, f := range vllm.Hists {
		add(f.Name, described{title: f.Title, unit: f.Unit, frac: f.Fraction, kind: kindHist})
	}
	for _, sm := range vllm.Sums {
		add(sm.Name, described{title: sm.Title, unit: sm.Unit, kind: kindCounter})
	}
	for _, u := range vllm.Unfinisheds {
		add(u.Name, described{title: u.Title, unit: u.Unit, kind: kindCounter})
	}
	for _, sr := range vllm.SumRatios {
		add(sr.Name, described{title: sr.Title, unit: sr.Unit, frac: true, kind: kindRatio})
	}
	for _, pt := range vllm.LabelParts {
		if pt.Share {
			add(pt.Name, described{title: pt.Title, unit: pt.Unit, frac: true, kind: kindRatio})
		} else {
			add(pt.Name, described{title: pt.Title, unit: pt.Unit, kind: kindCounter})
		}
	}
	return m
}()

// describe titles the chart id of a key v: the spec's title and the unit of the values it
// draws, which for a counter is its increase over the step (or, on its per-interval chart, in
// an interval). A name the spec does not know is its own title.
func describe(id string, v vllm.Value) (title, unit string, frac bool) {
	d, ok := specNames[v.Name]
	if !ok {
		if b, ok := balanceDescribed[v.Name]; ok {
			return b.title, b.unit, b.frac
		}
		if b, ok := computeDescribed[v.Name]; ok {
			return b.title, b.unit, b.frac
		}
		return id, "", false
	}
	title, unit, frac = d.title, d.unit, d.frac
	switch d.kind {
	case kindCounter:
		base := strings.TrimSuffix(unit, perInterval)
		if strings.HasSuffix(id, perInterval) {
			title += perInterval
			unit = base + perInterval
		} else {
			unit = base + " per step"
		}
	case kindRatio:
		// The step's value is over the whole step; its statistics over the intervals.
		if v.Stat == "" || v.Stat == vllm.WorstWorker {
			unit = strings.Replace(unit, perInterval, "", 1)
		}
	}
	if v.Label != "" && strings.HasPrefix(id, v.Name+"/"+v.Label) {
		title += ": " + v.Label
	}
	if v.Stat == vllm.WorstWorker {
		title += ", worst worker"
	}
	return title, unit, frac
}

// rankOf orders a chart within its group: the seed's names first, then the spec's order;
// names outside the spec after them, in key order.
func rankOf(v vllm.Value) int {
	if d, ok := specNames[v.Name]; ok {
		return d.rank
	}
	return len(specNames)
}

// groupKeys sorts keys (of the whole step, with their prefix) into the report's groups and
// charts: the groups in the spec's order, in each the seed's metrics first and then the
// spec's order, the fleet balance in the order of balanceCharts.
func groupKeys(keys []string) []group {
	// The keys without their prefix ("vllm" unless configured), taken apart once.
	rest := make([]string, len(keys))
	vs := make([]vllm.Value, len(keys))
	for i, key := range keys {
		rest[i] = key
		if j := strings.IndexByte(key, '/'); j >= 0 {
			rest[i] = key[j+1:]
		}
		vs[i] = vllm.ParseName(rest[i])
	}
	// A counter's step total and the mean/max/p95 of its per-interval deltas differ by orders
	// of magnitude: those stats get their own chart. Ratios' statistics share the ratio's.
	plain := map[string]bool{}
	for i, key := range keys {
		if strings.Contains(key, "/") {
			plain[rest[i]] = true
		}
	}
	byGroup := map[string][]placed{}
	where := map[string][2]int{} // chart id -> its group's index in pageGroups, its index there
	add := func(i int, c placed, line string) {
		if w, ok := where[c.ID]; ok {
			cs := byGroup[pageGroups[w[0]]]
			cs[w[1]].Keys = append(cs[w[1]].Keys, i)
			if line != "" {
				cs[w[1]].Names[keys[i]] = line
			}
			return
		}
		c.Keys = []int{i}
		if line != "" {
			c.Names = map[string]string{keys[i]: line}
		}
		where[c.ID] = [2]int{slices.Index(pageGroups, c.group), len(byGroup[c.group])}
		byGroup[c.group] = append(byGroup[c.group], c)
	}
	ledger := newLedgerPlacer(keys)
	for i, v := range vs {
		if c, line, ok := placeSplit(v); ok {
			add(i, c, line)
			continue
		}
		if c, line, ok := ledger.place(keys[i]); ok {
			add(i, c, line)
			continue
		}
		id := chartOf(v)
		if v.Stat != "" && v.Stat != vllm.WorstWorker && plain[id] && !strings.HasSuffix(v.Name, "_rate") {
			id += perInterval
		}
		name := groupOf(v)
		title, unit, frac := describe(id, v)
		rank := rankOf(v)
		if name == vllm.GroupBalance {
			// In the order of balanceCharts, the straggler's tail first: not by name.
			rank = slices.Index(balanceCharts, id)
			if rank < 0 {
				rank = len(balanceCharts)
			}
		}
		add(i, placed{chart: chart{ID: id, Title: title, Unit: unit, Frac: frac}, group: name, rank: rank}, "")
	}
	var gs []group
	for _, name := range pageGroups {
		ps := byGroup[name]
		if len(ps) == 0 {
			continue
		}
		slices.SortStableFunc(ps, func(a, b placed) int { return a.rank - b.rank })
		g := group{Name: name}
		for _, p := range ps {
			if p.Names != nil {
				sortLines(&p.chart, keys)
			}
			g.Charts = append(g.Charts, p.chart)
		}
		gs = append(gs, g)
	}
	return gs
}

// foldZeros takes the keys that are 0 in every step that has them out of the charts: a chart
// keeps its other keys, or goes when it has none; the ledger's stacked chart keeps all its
// keys unless all are 0. A phase's key goes only with the whole step's key that it is the
// phase's value of (of[k], -1 for none): a phase without preemptions is news beside a step
// with some. The keys taken out come back as charts of their own, in page order,
// for the page's one line that names them.
func foldZeros(gs []group, vals []values, of []int) ([]group, []chart) {
	zero := func(vs values) bool {
		seen := false
		for _, v := range vs {
			if math.IsNaN(v) {
				continue
			}
			if v != 0 {
				return false
			}
			seen = true
		}
		return seen
	}
	fold := func(k int) bool {
		return zero(vals[k]) && (of[k] < 0 || of[k] == k || zero(vals[of[k]]))
	}
	var folded []chart
	out := gs[:0]
	for _, g := range gs {
		charts := g.Charts[:0]
		for _, c := range g.Charts {
			var keep, zeros []int
			for _, k := range c.Keys {
				if fold(k) {
					zeros = append(zeros, k)
				} else {
					keep = append(keep, k)
				}
			}
			if c.Kind == chartStack && len(keep) > 0 {
				// A stack keeps its states that are zero in every step: its legend and tips
				// name every state, and 0 s unreachable is news too.
				keep, zeros = c.Keys, nil
			}
			if len(zeros) > 0 {
				z := c
				z.Keys = zeros
				folded = append(folded, z)
			}
			if len(keep) > 0 {
				c.Keys = keep
				charts = append(charts, c)
			}
		}
		if len(charts) > 0 {
			g.Charts = charts
			out = append(out, g)
		}
	}
	return out, folded
}
