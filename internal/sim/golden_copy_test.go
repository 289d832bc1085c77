package sim

import (
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
)

// goldenConfig renders pages with the fixtures' model name and KV cache size so that label
// values can be compared too.
func goldenConfig(version string) fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.Version = version
	cfg.DP = 2
	if version == "0.8" {
		cfg.DP = 1
	}
	cfg.BlocksPerEngine = 46080
	cfg.Model = "Qwen/Qwen3-1.7B"
	return cfg
}
