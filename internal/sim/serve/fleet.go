package serve

import (
	"errors"
)

// errStopped answers the calls that come as the fleet stops.
var ErrStopped = errors.New("the fleet is stopping")
