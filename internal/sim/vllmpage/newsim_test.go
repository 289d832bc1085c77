package vllmpage

import (
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
)

// newSim builds the model of cfg with this package's page writer.
func newSim(cfg fleetconfig.Config) (*fleetmodel.Sim, error) {
	s, err := fleetmodel.New(cfg)
	if err != nil {
		return nil, err
	}
	s.SetPages(NewVLLMPageWriter(cfg))
	return s, nil
}
