package page

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// workerTable numbers a page's workers in the order they appear.
type workerTable struct {
	keys  []workerKey
	index map[workerKey]int32 // built once a page has more workers than a scan is worth
}

// find returns the number of worker k, or -1.
func (t *workerTable) find(k workerKey) int32 {
	if t.index != nil {
		if i, ok := t.index[k]; ok {
			return i
		}
		return -1
	}
	for i, o := range t.keys {
		if o == k {
			return int32(i)
		}
	}
	return -1
}

// add numbers a worker not in the table yet.
func (t *workerTable) add(k workerKey) int32 {
	i := int32(len(t.keys))
	t.keys = append(t.keys, k)
	switch {
	case t.index != nil:
		t.index[k] = i
	case len(t.keys) > 8:
		t.index = make(map[workerKey]int32, 2*len(t.keys))
		for j, o := range t.keys {
			t.index[o] = int32(j)
		}
	}
	return i
}

// workerKey tells a page's workers apart: the engine kind, the engine label, the worker labels'
// key, and the ranks of the process that exported the samples (see groupWorkers).
type workerKey struct {
	engine, labels string
	kind           vllm.Engine
	rank           rank
}

// String names the worker in limit errors; a worker without worker labels reads as it did
// before there were any.
func (k workerKey) String() string {
	s := fmt.Sprintf("engine %q", k.engine)
	if k.labels != "" {
		s += " with " + k.labels
	}
	if k.rank.ranked {
		s += " at ranks " + k.rank.String()
	}
	return s
}

// workerLabelNames returns the names of the labels that tell workers apart among keys: the
// engine label when one has it, and their worker labels, sorted.
func workerLabelNames(keys []workerKey) []string {
	var names []string
	for _, k := range keys {
		if k.engine != "" && !slices.Contains(names, "engine") {
			names = append(names, "engine")
		}
		for n := range LabelMap(k.labels) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return names
}

// rank is the ranks a sample's rank labels (vllm.EngineSpec.RankLabels) give, in their order;
// ranked is set when it has any. A value that is not a number ranks after every number. id is
// the rank labels as a series key (`pp_rank="0",tp_rank="1"`): it tells apart two copies whose
// ranks are equal as numbers (tp_rank="0" and "00"), which order by it.
type rank struct {
	of     [2]int32
	ranked bool
	id     string
}

func (r *rank) set(i int, v string) {
	if i >= len(r.of) {
		return
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		n = math.MaxInt32
	}
	r.of[i], r.ranked = int32(n), true
}

func (r rank) less(o rank) bool {
	if r.of != o.of {
		return r.of[0] < o.of[0] || r.of[0] == o.of[0] && r.of[1] < o.of[1]
	}
	return r.id < o.id
}

func (r rank) String() string { return r.id }

// grouping maps a page's workers (one per engine label, worker labels, engine kind and ranks:
// see workerKey) to the workers it reports, in order of their first sample. Every process of a
// worker that exports a copy of its figures (its ranks: SGLang's TP and PP ranks of one DP
// rank) is one copy of one worker, beside the process without ranks that exports the rest
// (SGLang's tokenizer), if any, whose samples are every copy's. A page without ranks maps
// every worker to itself, of no copy.
type grouping struct {
	keys []workerKey // the reported workers, without ranks
	of   []int32     // the reported worker of each page worker
	// copy is the index of each page worker's copy among its reported worker's copies, in rank
	// order (0: the lowest ranks); -1 for a page worker without ranks.
	copy []int32
	// copies are each reported worker's copies: their page workers, in rank order; nil for one
	// without ranks.
	copies [][]int32
}

func groupWorkers(workers []workerKey) grouping {
	g := grouping{of: make([]int32, len(workers)), copy: make([]int32, len(workers))}
	ranked := false
	for i, w := range workers {
		g.of[i], g.copy[i] = int32(i), -1
		ranked = ranked || w.rank.ranked
	}
	if !ranked {
		g.keys = workers
		return g
	}
	by := map[workerKey]int32{}
	for i, w := range workers {
		k := workerKey{engine: w.engine, labels: w.labels, kind: w.kind}
		r, ok := by[k]
		if !ok {
			r = int32(len(g.keys))
			by[k] = r
			g.keys = append(g.keys, k)
			g.copies = append(g.copies, nil)
		}
		g.of[i] = r
		if w.rank.ranked {
			g.copies[r] = append(g.copies[r], int32(i))
		}
	}
	for _, cs := range g.copies {
		slices.SortFunc(cs, func(a, b int32) int {
			switch {
			case workers[a].rank.less(workers[b].rank):
				return -1
			case workers[b].rank.less(workers[a].rank):
				return 1
			}
			return 0
		})
		for c, w := range cs {
			g.copy[w] = int32(c)
		}
	}
	return g
}

// views returns the number of views of each reported worker (its copies, or 1 without them:
// see EnginePage.Copies) and where each one's views begin among all of them, in order.
func (g *grouping) views() (n, base []int32) {
	n, base = make([]int32, len(g.keys)), make([]int32, len(g.keys)+1)
	for r := range g.keys {
		n[r] = 1
		if r < len(g.copies) && len(g.copies[r]) > 1 {
			n[r] = int32(len(g.copies[r]))
		}
		base[r+1] = base[r] + n[r]
	}
	return n, base
}
