// Package clock lets the scrape loop and step timer run on real time in production and on a
// manually advanced time in tests, which then never sleep.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes tickers.
type Clock interface {
	Now() time.Time
	NewTicker(d time.Duration) Ticker
}

// Ticker delivers ticks on C.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the wall clock.
type Real struct{}

// Now returns the current time.
func (Real) Now() time.Time { return time.Now() }

// NewTicker returns a time.Ticker.
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// Fake is a clock that moves only when Advance is called. Its tickers drop ticks that their
// reader has not taken, like time.Ticker.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*fakeTicker
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTicker returns a ticker that fires every d of fake time.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTicker{c: make(chan time.Time, 1), d: d, next: f.now.Add(d), f: f}
	f.tickers = append(f.tickers, t)
	return t
}

// Advance moves the clock forward by d, firing the tickers that come due, in time order.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	end := f.now.Add(d)
	for {
		var due []*fakeTicker
		for _, t := range f.tickers {
			if !t.stopped && !t.next.After(end) {
				due = append(due, t)
			}
		}
		if len(due) == 0 {
			break
		}
		sort.Slice(due, func(i, j int) bool { return due[i].next.Before(due[j].next) })
		t := due[0]
		f.now = t.next
		t.next = t.next.Add(t.d)
		select {
		case t.c <- f.now:
		default:
		}
	}
	f.now = end
	f.mu.Unlock()
}

type fakeTicker struct {
	c       chan time.Time
	d       time.Duration
	next    time.Time
	stopped bool
	f       *Fake
}

func (t *fakeTicker) C() <-chan time.Time { return t.c }

func (t *fakeTicker) Stop() {
	t.f.mu.Lock()
	t.stopped = true
	t.f.mu.Unlock()
}
