package clock

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Fake is a clock that moves only when Advance is called. Its tickers drop ticks that their
// reader has not taken, like time.Ticker; its timers fire once, into a buffered channel.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waits   []*fakeWait
	changed chan struct{} // closed and replaced whenever the pending timers change
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t, changed: make(chan struct{})} }

// fakeWait is a ticker (every > 0) or a timer (every == 0).
type fakeWait struct {
	f       *Fake
	c       chan time.Time
	every   time.Duration
	next    time.Time
	stopped bool
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTicker returns a ticker that fires every d of fake time. d must be positive.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic(fmt.Sprintf("clock: non-positive ticker interval %s", d))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWait{f: f, c: make(chan time.Time, 1), every: d, next: f.now.Add(d)}
	f.waits = append(f.waits, w)
	return fakeTicker{w}
}

// NewTimer returns a timer that fires once d of fake time has passed; at once when d <= 0.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWait{f: f, c: make(chan time.Time, 1), next: f.now.Add(d)}
	if d <= 0 {
		w.c <- f.now
		w.stopped = true
		return fakeTimer{w}
	}
	f.waits = append(f.waits, w)
	f.notifyLocked()
	return fakeTimer{w}
}

// Advance moves the clock forward by d, firing the tickers and timers that come due, in time
// order, each seeing the time it was due at.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.now.Add(d)
	for {
		var due []*fakeWait
		for _, w := range f.waits {
			if !w.stopped && !w.next.After(end) {
				due = append(due, w)
			}
		}
		if len(due) == 0 {
			break
		}
		sort.SliceStable(due, func(i, j int) bool { return due[i].next.Before(due[j].next) })
		w := due[0]
		f.now = w.next
		select {
		case w.c <- f.now:
		default:
		}
		if w.every > 0 {
			w.next = w.next.Add(w.every)
		} else {
			f.removeLocked(w)
		}
	}
	f.now = end
}

// Timers returns how many timers wait to fire.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timersLocked()
}

// BlockUntil waits until at least n timers wait to fire, so that a test advances the clock
// only once the code under test waits on it. It fails when ctx ends first.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		k, ch := f.timersLocked(), f.changed
		f.mu.Unlock()
		if k >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d timers wait on the fake clock, want %d: %w", k, n, ctx.Err())
		}
	}
}

func (f *Fake) timersLocked() int {
	n := 0
	for _, w := range f.waits {
		if w.every == 0 && !w.stopped {
			n++
		}
	}
	return n
}

func (f *Fake) removeLocked(w *fakeWait) {
	w.stopped = true
	for i, x := range f.waits {
		if x == w {
			f.waits = append(f.waits[:i], f.waits[i+1:]...)
			break
		}
	}
	if w.every == 0 {
		f.notifyLocked()
	}
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTicker struct{ w *fakeWait }

func (t fakeTicker) C() <-chan time.Time { return t.w.c }

func (t fakeTicker) Stop() {
	t.w.f.mu.Lock()
	defer t.w.f.mu.Unlock()
	if !t.w.stopped {
		t.w.f.removeLocked(t.w)
	}
}

type fakeTimer struct{ w *fakeWait }

func (t fakeTimer) C() <-chan time.Time { return t.w.c }

func (t fakeTimer) Reset(d time.Duration) {
	f := t.w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-t.w.c: // a time nobody received
	default:
	}
	if !t.w.stopped {
		f.removeLocked(t.w)
	}
	t.w.next = f.now.Add(d)
	if d <= 0 {
		t.w.c <- f.now
		return
	}
	t.w.stopped = false
	f.waits = append(f.waits, t.w)
	f.notifyLocked()
}

func (t fakeTimer) Stop() bool {
	t.w.f.mu.Lock()
	defer t.w.f.mu.Unlock()
	if t.w.stopped {
		return false
	}
	t.w.f.removeLocked(t.w)
	return true
}
