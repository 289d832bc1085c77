// Package simtest holds what the tests of the simulator's packages share: the fleets they
// configure, the readers of the pages they check, and the HTTP calls they make. Only tests
// import it; it does not import fleetmodel, so that fleetmodel's own tests can use it too.
package simtest

import "time"

// Start is the wall-clock time the tests' simulations start at.
var Start = time.Unix(1795998522, 408573600)
