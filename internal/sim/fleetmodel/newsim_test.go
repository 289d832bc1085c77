package fleetmodel

import "github.com/vllmstat/vllmstat/internal/sim/fleetconfig"

// newSim builds the model of cfg, without a page writer.
func newSim(cfg fleetconfig.Config) (*Sim, error) { return New(cfg) }
