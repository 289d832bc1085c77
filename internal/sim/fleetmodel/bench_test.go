package fleetmodel

import (
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// BenchmarkEngineStep measures one iteration of an engine serving a GRPO batch share: 64
// requests over 8 prompts, the KV cache full enough to preempt.
func BenchmarkEngineStep(b *testing.B) {
	cfg := fleetconfig.DefaultConfig()
	ec := cfg.EngineConfig()
	gcfg := cfg.Workload
	b.ReportAllocs()
	var e *core.Engine
	var gen *workload.Generator
	n := 0
	for b.Loop() {
		if e == nil || !e.Busy() {
			b.StopTimer()
			e = core.NewEngineWithBuckets(ec, snap.NewBucketSet(ec.MaxModelLen))
			gen = workload.NewGenerator(gcfg, 4, cfg.MaxModelLen, int64(n))
			for _, rs := range gen.Batch(1, 0) {
				if rs.Engine == 0 {
					e.Submit(rs.Spec)
				}
			}
			b.StartTimer()
		}
		e.Step()
		n++
	}
}

// BenchmarkFleet64 simulates one second of a fleet of 64 engines (32 servers x 2) each as busy
// as in the demo, and publishes its pages the way the running fleet does every tick (50 ticks).
// ns/op divided by 1e9 is the share of one core the fleet needs at speed 1.
func BenchmarkFleet64(b *testing.B) {
	cfg := fleetconfig.DefaultConfig()
	cfg.Servers, cfg.DP = 32, 2
	cfg.Workload.Prompts = 8 * 64
	s := mustSim(b, cfg)
	pages := make([]snap.PageState, cfg.Servers)
	b.ReportAllocs()
	at := time.Duration(0)
	for b.Loop() {
		for range 50 {
			at += 20 * time.Millisecond
			s.AdvanceTo(at)
			for i := range pages {
				s.FillPage(i, simtest.Start, &pages[i])
			}
			s.Totals()
		}
	}
	tot := s.Totals()
	b.ReportMetric(tot["generation_tokens"]/at.Seconds()/64, "gen_tok/s/engine")
}
