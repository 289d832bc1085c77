package page

import (
	"fmt"
	"math"
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

// rank is the ranks a sample's rank labels (vllm.EngineSpec.RankLabels) give, in their order;
// ranked is set when it has any. A value that is not a number ranks after every number.
type rank struct {
	of     [2]int32
	ranked bool
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

func (r rank) less(o rank) bool { return r.of[0] < o.of[0] || r.of[0] == o.of[0] && r.of[1] < o.of[1] }

func (r rank) String() string { return fmt.Sprintf("%d/%d", r.of[0], r.of[1]) }

// groupWorkers maps a page's workers to the workers it reports, in order of their first sample:
// every process of a worker that exports copies of its figures (its ranks: SGLang's TP and PP
// ranks of one DP rank) is one worker, whose samples are those of its lowest ranks, and of the
// process without ranks that exports the rest (SGLang's tokenizer), if any. group[w] is the
// reported worker of page worker w, -1 for a copy left out; keys are the reported workers,
// without ranks. A page without ranks maps every worker to itself.
func groupWorkers(workers []workerKey) (group []int32, keys []workerKey) {
	group = make([]int32, len(workers))
	ranked := false
	for i, w := range workers {
		group[i] = int32(i)
		ranked = ranked || w.rank.ranked
	}
	if !ranked {
		return group, workers
	}
	type best struct {
		key  int32
		rank rank
		w    int // the page worker of the lowest ranks so far, -1 for none
	}
	by := map[workerKey]*best{}
	for i, w := range workers {
		k := workerKey{engine: w.engine, labels: w.labels, kind: w.kind}
		b := by[k]
		if b == nil {
			b = &best{key: int32(len(keys)), w: -1}
			by[k] = b
			keys = append(keys, k)
		}
		group[i] = b.key
		if !w.rank.ranked {
			continue
		}
		if b.w < 0 || w.rank.less(b.rank) {
			if b.w >= 0 {
				group[b.w] = -1
			}
			b.w, b.rank = i, w.rank
		} else {
			group[i] = -1
		}
	}
	return group, keys
}
