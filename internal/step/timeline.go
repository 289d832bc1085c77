package step

import (
	"slices"
	"time"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// A worker's timeline is its per-interval samples of the families with Timeline, each at its
// offset from the step start, for plots and reports (Record.Timeline).

// timeline is the worker's series in the step, leaving out the values beyond the float limit.
func timeline(id WorkerID, wa *workerAcc) WorkerTimeline {
	wt := WorkerTimeline{WorkerID: id, Series: map[string][]Point{}}
	add := func(name string, s *series) {
		if s.v.len() == 0 {
			return
		}
		ps := make([]Point, 0, s.v.len())
		s.at.each(func(at int64) { ps = append(ps, Point{OffsetS: time.Duration(at).Seconds()}) })
		i := 0
		s.v.each(func(v float64) { ps[i].Value = v; i++ })
		// an increase beyond the float limit is no point
		if ps = slices.DeleteFunc(ps, func(p Point) bool { return !finite(p.Value) }); len(ps) > 0 {
			wt.Series[name] = ps
		}
	}
	for g, f := range vllm.Gauges[:vllm.NumKeyedGauges] {
		if f.Timeline {
			add(f.Name, &wa.gauges[g])
		}
	}
	for c, f := range vllm.Counters {
		if f.Timeline {
			add(f.Name, wa.delta(vllm.Counter(c)))
		}
	}
	for i, rt := range vllm.Ratios {
		if !rt.Timeline {
			continue
		}
		var ps []Point
		wa.eachRatio(i, func(at int64, v float64) {
			if finite(v) {
				ps = append(ps, Point{OffsetS: time.Duration(at).Seconds(), Value: v})
			}
		})
		if len(ps) > 0 {
			wt.Series[rt.Name] = ps
		}
	}
	return wt
}
