package promtext

import (
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// appendMultiprocessHistogram writes one histogram child as prometheus_client's multiprocess
// collector lists it: _sum, then the buckets (cumulative), then _count.
func AppendMultiprocessHistogram(dst []byte, name string, ls *LabelSet, les []string, h *snap.Histogram) []byte {
	dst = AppendSample(dst, name, "_sum", ls, "", h.Sum)
	var cum uint64
	for i, le := range les {
		cum += h.Counts[i]
		dst = AppendSample(dst, name, "_bucket", ls, le, float64(cum))
	}
	return AppendSample(dst, name, "_count", ls, "", float64(cum))
}
