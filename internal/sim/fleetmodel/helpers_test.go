// Copies of test helpers whose originals are in the tests of the simulator's other packages:
// a test file cannot be imported.

package fleetmodel

import (
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
)

var testStart = time.Unix(1795998522, 408573600)

func mustSim(t testing.TB, cfg fleetconfig.Config) *Sim {
	t.Helper()
	s, err := newSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
