package vllmpage

import (
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// Compare runs with benchstat:
//
//	go test -run '^$' -bench . -count 10 ./internal/sim/ > new.txt && benchstat old.txt new.txt

func BenchmarkRenderPage(b *testing.B) {
	cfg := fleetconfig.DefaultConfig()
	cfg.DP = 2
	s := mustSim(b, cfg)
	s.AdvanceTo(6 * time.Second)
	var st snap.PageState
	s.FillPage(0, simtest.Start, &st)
	r := NewVLLMPageWriter(cfg)
	buf := r.Render(nil, &st)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = r.Render(buf[:0], &st)
	}
}
