package step

import (
	"github.com/vllmstat/vllmstat/internal/vllm"
)

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
