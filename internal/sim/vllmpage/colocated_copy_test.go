package vllmpage

import (
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
)

// colocatedConfig is the demo's fleet in the colocated loop: 2 servers x 2 engines, an eval
// batch every second step, four steps.
func colocatedConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.DP = 2
	cfg.Workload.Colocated = true
	cfg.Workload.EvalEvery = 2
	cfg.Workload.Batches = 4
	return cfg
}
