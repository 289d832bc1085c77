// Package clock is the one clock of the module: everything that decides by time (scrape and
// step tickers, the spread offset, the shutdown deadline, the simulator's pacing and faults,
// timestamps in reports) asks a Clock, so that production runs on real time and tests on a
// manually advanced time, and then never sleep.
package clock

import (
	"time"
)

// Clock tells the time and makes tickers and timers.
type Clock interface {
	Now() time.Time
	NewTicker(d time.Duration) Ticker
	NewTimer(d time.Duration) Timer
}

// Ticker delivers ticks on C.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Timer delivers one time on C after its duration, unless stopped first.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; false if it had already fired or been stopped.
	Stop() bool
	// Reset makes the timer fire once d has passed from now, whether it had fired, been
	// stopped or not; a time it sent before and nobody received is dropped (as time.Timer's
	// Reset does since Go 1.23). A goroutine that waits many times reuses one timer rather
	// than making one per wait.
	Reset(d time.Duration)
}

// After returns a channel that receives the time once d has passed on c. The timer cannot be
// stopped: use NewTimer where the wait may be abandoned often.
func After(c Clock, d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// Real is the wall clock.
type Real struct{}

// Now returns the current time.
func (Real) Now() time.Time { return time.Now() }

// NewTicker returns a time.Ticker.
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

// NewTimer returns a time.Timer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Stop() bool            { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
