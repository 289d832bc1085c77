package sim

import (
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/sglangpage"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
	"github.com/vllmstat/vllmstat/internal/sim/trtllmpage"
	"github.com/vllmstat/vllmstat/internal/sim/vllmpage"
)

// NewSim builds the model of the fleet cfg describes, at simulated time 0, with the page writer
// of its engine.
func NewSim(cfg fleetconfig.Config) (*fleetmodel.Sim, error) {
	s, err := fleetmodel.New(cfg)
	if err != nil {
		return nil, err
	}
	s.SetPages(pageWriter(cfg))
	return s, nil
}

// pageWriter returns a writer of the pages of cfg's servers: SGLang's layout, trtllm-serve's,
// or the vLLM release's (single-process or multiprocess). A new engine's page writer is chosen
// here.
func pageWriter(cfg fleetconfig.Config) snap.PageRenderer {
	switch cfg.Engine {
	case fleetconfig.EngineSGLang:
		return sglangpage.NewSGLangPageWriter(cfg)
	case fleetconfig.EngineTRTLLM:
		return trtllmpage.NewTRTLLMPageWriter(cfg)
	}
	return vllmpage.NewVLLMPageWriter(cfg)
}
