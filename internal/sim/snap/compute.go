package snap

// shapeStats are an engine's counts of the families above. The float counters hold whole
// numbers: every term is a multiple of 2^13 for the default model, exact well past any run.
type ShapeStats struct {
	Flops, ReadBytes, WriteBytes float64
	Recomputed                   int64
	KvLifetime, KvIdle, KvReuse  Histogram
}

func (s *ShapeStats) Add(o *ShapeStats) {
	s.Flops += o.Flops
	s.ReadBytes += o.ReadBytes
	s.WriteBytes += o.WriteBytes
	s.Recomputed += o.Recomputed
	s.KvLifetime.Add(&o.KvLifetime)
	s.KvIdle.Add(&o.KvIdle)
	s.KvReuse.Add(&o.KvReuse)
}

// kvResidencyBounds are vLLM's buckets of the KV block residency histograms, in seconds.
var KvResidencyBounds = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300,
	600, 1200, 1800}
