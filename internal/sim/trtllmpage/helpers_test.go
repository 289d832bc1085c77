package trtllmpage

import (
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// trtllmConfig is one TensorRT-LLM server with the fixtures' model and a KV cache small enough
// that a batch preempts requests, running one GRPO batch.
func trtllmConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.Engine = fleetconfig.EngineTRTLLM
	cfg.Servers, cfg.DP = 1, 1
	cfg.Model = "Qwen/Qwen3-1.7B"
	cfg.BlocksPerEngine = 640
	cfg.Workload.Batches = 1
	return cfg
}

// mustSim builds the model of cfg with this package's page writer.
func mustSim(t testing.TB, cfg fleetconfig.Config) *fleetmodel.Sim {
	t.Helper()
	s := simtest.Build(t, fleetmodel.New, cfg)
	s.SetPages(NewTRTLLMPageWriter(cfg))
	return s
}

// pageAt is server 0's page once the model reached at.
func pageAt(s *fleetmodel.Sim, at time.Duration) string {
	s.AdvanceTo(at)
	return string(s.Page(0, simtest.Start))
}
