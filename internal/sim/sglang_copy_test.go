package sim

import (
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
)

func sglangConfig(servers, dp int) fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.Engine = fleetconfig.EngineSGLang
	cfg.Servers, cfg.DP = servers, dp
	cfg.Model = "Qwen/Qwen3-1.7B"
	cfg.BlocksPerEngine = 640 // small enough to retract
	return cfg
}
