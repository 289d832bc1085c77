package fleetmodel

import (
	"testing"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

func mustSim(t testing.TB, cfg fleetconfig.Config) *Sim {
	t.Helper()
	return simtest.Build(t, newSim, cfg)
}
