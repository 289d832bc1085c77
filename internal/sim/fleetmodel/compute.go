package fleetmodel

import (
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// addShapeTotals adds the families' counts of every engine, all lives, to a Totals map: keys
// "recomputed_token_executions", "estimated_flops_per_gpu", "estimated_read_bytes_per_gpu",
// "estimated_write_bytes_per_gpu" (summed over the engines, each one GPU), and the residency
// histograms' "<name>_count" and "<name>_sum", each present when the pages show its family.
func (s *Sim) addShapeTotals(m map[string]float64) {
	if !s.Cfg.Shapes(s.release) {
		return
	}
	var t snap.ShapeStats
	for _, srv := range s.Servers {
		for i, e := range srv.Engines {
			t.Add(&srv.carry[i].Shape)
			t.Add(&e.Stats.Shape)
		}
	}
	m["recomputed_token_executions"] = float64(t.Recomputed)
	if s.Cfg.MFUMetrics {
		m["estimated_flops_per_gpu"] = t.Flops
		m["estimated_read_bytes_per_gpu"] = t.ReadBytes
		m["estimated_write_bytes_per_gpu"] = t.WriteBytes
	}
	if s.Cfg.KVCacheMetrics {
		for _, h := range []struct {
			name string
			h    *snap.Histogram
		}{{"kv_block_lifetime_seconds", &t.KvLifetime}, {"kv_block_idle_before_evict_seconds", &t.KvIdle},
			{"kv_block_reuse_gap_seconds", &t.KvReuse}} {
			m[h.name+"_count"] = float64(h.h.Count)
			m[h.name+"_sum"] = h.h.Sum
		}
	}
}
