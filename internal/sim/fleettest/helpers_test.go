package fleettest

import (
	"context"
	"testing"

	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

func startFleet(t *testing.T, cfg fleetconfig.Config) *sim.Fleet {
	t.Helper()
	return simtest.Started(t, func() (*sim.Fleet, error) { return sim.Start(context.Background(), cfg) })
}
