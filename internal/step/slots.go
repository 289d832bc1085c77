package step

import (
	"fmt"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// A worker's share of a step (workerAcc) has room for the per-interval samples of the few
// counters and ratios that have statistics or timelines, and for the label splits of the few
// counters and gauges that have a split, each in a slot of its own: room for every counter and
// ratio of the spec in each of them was most of what a worker's step held (1.7 of 3.4 KB with
// the request-shape families), and a fleet makes a step's for every worker at every step.
const (
	numDeltaSlots      = 6 // counters with Scalars or Timeline
	numRatioSlots      = 3 // ratios with Scalars or Timeline
	numSplitSlots      = 8 // counters with a Split label
	numSplitGaugeSlots = 3 // keyed gauges with a Split label
)

// The slot of each family in a worker's step, -1 for none.
var (
	deltaSlot      [vllm.NumCounters]int8
	splitSlot      [vllm.NumCounters]int8
	splitGaugeSlot [vllm.NumKeyedGauges]int8
	ratioSlot      []int8 // by index of vllm.Ratios
	// slotCounter is the counter of each split slot (those past the spec's are -1).
	slotCounter [numSplitSlots]vllm.Counter
)

func init() {
	nd, ns, ng, nr := 0, 0, 0, 0
	for c := range slotCounter {
		slotCounter[c] = -1
	}
	for c, f := range vllm.Counters {
		deltaSlot[c], splitSlot[c] = -1, -1
		if f.Scalars || f.Timeline {
			deltaSlot[c], nd = int8(nd), nd+1
		}
		if f.Split != "" {
			if ns < numSplitSlots {
				slotCounter[ns] = vllm.Counter(c)
			}
			splitSlot[c], ns = int8(ns), ns+1
		}
	}
	for g, f := range vllm.Gauges[:vllm.NumKeyedGauges] {
		splitGaugeSlot[g] = -1
		if f.Split != "" {
			splitGaugeSlot[g], ng = int8(ng), ng+1
		}
	}
	ratioSlot = make([]int8, len(vllm.Ratios))
	for i, rt := range vllm.Ratios {
		ratioSlot[i] = -1
		if rt.Scalars || rt.Timeline {
			ratioSlot[i], nr = int8(nr), nr+1
		}
	}
	// The spec and the room above are edited together; a spec with more would index past it.
	if nd > numDeltaSlots || nr > numRatioSlots || ns > numSplitSlots || ng > numSplitGaugeSlots {
		panic(fmt.Sprintf("step: the spec needs %d counter, %d ratio, %d split counter and %d split gauge slots; raise numDeltaSlots, numRatioSlots, numSplitSlots, numSplitGaugeSlots",
			nd, nr, ns, ng))
	}
}

// noSeries is the empty series of a family without a slot, read only.
var noSeries series

// delta returns counter c's per-interval increases in the step; empty (and shared, read only)
// for a counter whose samples no statistic or timeline uses.
func (wa *workerAcc) delta(c vllm.Counter) *series {
	if s := deltaSlot[c]; s >= 0 {
		return &wa.deltaCols[s]
	}
	return &noSeries
}

// splitOf returns counter c's increases in the step by its split label's value; nil when none.
func (wa *workerAcc) splitOf(c vllm.Counter) map[string]float64 {
	if s := splitSlot[c]; s >= 0 {
		return wa.splitCols[s]
	}
	return nil
}

// splitGaugeOf returns gauge g's samples in the step by its split label's value; nil when none.
func (wa *workerAcc) splitGaugeOf(g vllm.Gauge) map[string]*floats {
	if s := splitGaugeSlot[g]; s >= 0 {
		return wa.splitGaugeCols[s]
	}
	return nil
}
