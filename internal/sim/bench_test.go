package sim

import (
	"testing"
	"time"
)

// Compare runs with benchstat:
//
//	go test -run '^$' -bench . -count 10 ./internal/sim/ > new.txt && benchstat old.txt new.txt

func BenchmarkRenderPage(b *testing.B) {
	cfg := DefaultConfig()
	cfg.DP = 2
	s := mustSim(b, cfg)
	s.AdvanceTo(6 * time.Second)
	var st pageState
	s.fillPage(0, testStart, &st)
	r := newVLLMPageWriter(cfg)
	buf := r.render(nil, &st)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = r.render(buf[:0], &st)
	}
}

// BenchmarkEngineStep measures one iteration of an engine serving a GRPO batch share: 64
// requests over 8 prompts, the KV cache full enough to preempt.
func BenchmarkEngineStep(b *testing.B) {
	cfg := DefaultConfig()
	ec := cfg.engineConfig()
	gcfg := cfg.Workload
	b.ReportAllocs()
	var e *Engine
	var gen *generator
	n := 0
	for b.Loop() {
		if e == nil || !e.Busy() {
			b.StopTimer()
			e = newEngine(ec, newBucketSet(ec.MaxModelLen))
			gen = newGenerator(gcfg, 4, cfg.MaxModelLen, int64(n))
			for _, rs := range gen.batch(1, 0) {
				if rs.engine == 0 {
					e.Submit(rs.spec)
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
	cfg := DefaultConfig()
	cfg.Servers, cfg.DP = 32, 2
	cfg.Workload.Prompts = 8 * 64
	s := mustSim(b, cfg)
	pages := make([]pageState, cfg.Servers)
	b.ReportAllocs()
	at := time.Duration(0)
	for b.Loop() {
		for range 50 {
			at += 20 * time.Millisecond
			s.AdvanceTo(at)
			for i := range pages {
				s.fillPage(i, testStart, &pages[i])
			}
			s.Totals()
		}
	}
	tot := s.Totals()
	b.ReportMetric(tot["generation_tokens"]/at.Seconds()/64, "gen_tok/s/engine")
}
