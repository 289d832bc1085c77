package fleetconfig

import (
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// validateAPIServers checks the API server count against the rest of the configuration.
func (c Config) validateAPIServers(bad func(string, ...any)) {
	switch {
	case c.APIServerCount < 0:
		bad("api server count must not be negative, got %d", c.APIServerCount)
	case c.APIServerCount <= 1:
	case c.Engine == EngineSGLang || c.Engine == EngineTRTLLM:
		bad("api server count is vLLM's: use it with engine vllm")
	case c.Version != "" && !isVersion020(c.Version):
		bad("api server count %d wants vllm version 0.20, whose gauges are all mostrecent in multiprocess mode, got %s",
			c.APIServerCount, c.Version)
	case c.SyncsWeights():
		bad("api server count %d cannot run the colocated or async loop: their dev-mode RL families are not simulated in multiprocess mode", c.APIServerCount)
	}
}

func isVersion020(s string) bool {
	r, err := snap.ParseRelease(s)
	return err == nil && r.Name == "0.20"
}

// multiprocess reports whether the fleet's vLLM servers serve the multiprocess page.
func (c Config) Multiprocess() bool { return c.APIServerCount > 1 && c.Engine != EngineSGLang }
