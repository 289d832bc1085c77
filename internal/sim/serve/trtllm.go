package serve

import (
	"net/http"

	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
)

// handleTRTLLMControl serves a driven TensorRT-LLM server's memory calls (tensorrt_llm/serve/
// openai_server.py, its RL endpoints): POST /release_memory, a sleep that frees the weights and
// the KV cache, and POST /resume_memory, which brings both back (--wake-time each, answered once
// both are), each answered {"status": "success"} as trtllm-serve answers them. The page shows
// neither: no family of MetricsCollector's reports memory released. Its POST /update_weights, which loads weights the
// trainer shares over IPC, is not served.
func (s *Server) handleTRTLLMControl(mux *http.ServeMux) {
	success := map[string]any{"status": "success"}
	mux.HandleFunc("POST /release_memory", s.control(func(sim *fleetmodel.Sim, _ *http.Request) (any, error) {
		return success, sim.Sleep(s.idx, core.SleepLevel)
	}))
	mux.HandleFunc("POST /resume_memory", s.controlTimed(func(sim *fleetmodel.Sim, _ *http.Request, done func()) (any, error) {
		sim.WakeUp(s.idx, true, true, done)
		return success, nil
	}))
}
