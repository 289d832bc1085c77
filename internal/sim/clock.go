package sim

import "time"

// Clock is the wall clock the fleet paces itself by and times faults with. Tests that want to
// control wall time inject their own; everything else uses the real one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
