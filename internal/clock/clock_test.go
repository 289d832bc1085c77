package clock

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// received returns what c holds without waiting, and whether it held anything.
func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimerFiresOnceAtItsTime(t *testing.T) {
	f := NewFake(t0)
	tm := f.NewTimer(3 * time.Second)
	f.Advance(2 * time.Second)
	if _, ok := received(tm.C()); ok {
		t.Fatal("fired 1 s early")
	}
	f.Advance(5 * time.Second)
	got, ok := received(tm.C())
	if !ok || !got.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("fired %v (%v), want at %v", got, ok, t0.Add(3*time.Second))
	}
	if !f.Now().Equal(t0.Add(7 * time.Second)) {
		t.Fatalf("now %v after advancing 7 s", f.Now())
	}
	f.Advance(time.Hour)
	if _, ok := received(tm.C()); ok {
		t.Fatal("fired twice")
	}
	if tm.Stop() {
		t.Fatal("Stop of a fired timer reported that it stopped it")
	}
}

func TestFakeTimerStop(t *testing.T) {
	f := NewFake(t0)
	tm := f.NewTimer(time.Second)
	if f.Timers() != 1 {
		t.Fatalf("%d timers pending, want 1", f.Timers())
	}
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer reported that it had fired")
	}
	if f.Timers() != 0 || tm.Stop() {
		t.Fatal("a stopped timer is still pending")
	}
	f.Advance(time.Hour)
	if _, ok := received(tm.C()); ok {
		t.Fatal("a stopped timer fired")
	}
}

func TestFakeTimerZeroFiresAtOnce(t *testing.T) {
	f := NewFake(t0)
	for _, d := range []time.Duration{0, -time.Second} {
		got, ok := received(f.NewTimer(d).C())
		if !ok || !got.Equal(t0) {
			t.Fatalf("timer of %s: %v %v, want the current time at once", d, got, ok)
		}
	}
	if f.Timers() != 0 {
		t.Fatalf("%d timers pending", f.Timers())
	}
}

// TestFakeOrder checks that one Advance fires tickers and timers in time order, each at its own
// time, and that a ticker drops the ticks nobody took.
func TestFakeOrder(t *testing.T) {
	f := NewFake(t0)
	tk := f.NewTicker(2 * time.Second)
	tm := f.NewTimer(3 * time.Second)
	after := After(f, 5*time.Second)
	f.Advance(10 * time.Second)
	if got, _ := received(tk.C()); !got.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("ticker holds %v, want the first tick at +2s (later ones dropped)", got)
	}
	if got, _ := received(tm.C()); !got.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("timer fired at %v, want +3s", got)
	}
	if got, _ := received(after); !got.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("After fired at %v, want +5s", got)
	}
	f.Advance(2 * time.Second)
	if got, _ := received(tk.C()); !got.Equal(t0.Add(12 * time.Second)) {
		t.Errorf("ticker holds %v, want +12s", got)
	}
	tk.Stop()
	f.Advance(10 * time.Second)
	if _, ok := received(tk.C()); ok {
		t.Error("a stopped ticker ticked")
	}
}

// TestFakeBlockUntil checks that BlockUntil returns once a goroutine waits on a timer, so that
// a test can advance the clock knowing the wait has begun.
func TestFakeBlockUntil(t *testing.T) {
	f := NewFake(t0)
	woke := make(chan time.Time)
	go func() { woke <- <-After(f, time.Minute) }()
	if err := f.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Minute)
	if got := <-woke; !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("woke at %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.BlockUntil(ctx, 1); err == nil {
		t.Fatal("BlockUntil returned with no timer pending and ctx done")
	}
}

// TestRealUnderSynctest checks that the real clock's timers and tickers are the time
// package's: in a synctest bubble they run on the bubble's fake time.
func TestRealUnderSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Clock = Real{}
		start := c.Now()
		tk := c.NewTicker(time.Second)
		defer tk.Stop()
		<-c.NewTimer(time.Hour).C()
		if d := c.Now().Sub(start); d != time.Hour {
			t.Fatalf("timer of an hour fired after %s", d)
		}
		<-tk.C()
		tm := c.NewTimer(time.Hour)
		if !tm.Stop() {
			t.Fatal("Stop of a pending timer reported that it had fired")
		}
		<-After(c, time.Minute)
		if d := c.Now().Sub(start); d != time.Hour+time.Minute {
			t.Fatalf("After a minute: %s since start", d)
		}
	})
}

// A reset timer fires once, d after the reset, whether it had fired (a time nobody received is
// dropped), been stopped, or was still pending; the real clock's does the same.
func TestTimerReset(t *testing.T) {
	f := NewFake(t0)
	tm := f.NewTimer(time.Second)
	f.Advance(time.Second) // fired, not received
	tm.Reset(2 * time.Second)
	if _, ok := received(tm.C()); ok {
		t.Fatal("the time sent before the reset is still there")
	}
	f.Advance(time.Second)
	if _, ok := received(tm.C()); ok {
		t.Fatal("fired 1 s after a reset of 2 s")
	}
	f.Advance(time.Second)
	if got, ok := received(tm.C()); !ok || !got.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("fired %v (%v), want at %v", got, ok, t0.Add(3*time.Second))
	}
	tm.Reset(time.Second) // after firing and being received
	tm.Reset(5 * time.Second)
	if f.Timers() != 1 {
		t.Fatalf("%d timers pending after two resets, want 1", f.Timers())
	}
	f.Advance(4 * time.Second)
	if _, ok := received(tm.C()); ok {
		t.Fatal("the first of two resets fired")
	}
	tm.Stop()
	tm.Reset(time.Second) // after Stop
	f.Advance(time.Second)
	if got, ok := received(tm.C()); !ok || !got.Equal(t0.Add(8*time.Second)) {
		t.Fatalf("after Stop and Reset: fired %v (%v), want at %v", got, ok, t0.Add(8*time.Second))
	}
	tm.Reset(0)
	if got, ok := received(tm.C()); !ok || !got.Equal(t0.Add(8*time.Second)) {
		t.Fatalf("Reset(0): %v (%v), want the current time at once", got, ok)
	}
	if f.Timers() != 0 {
		t.Fatalf("%d timers pending", f.Timers())
	}

	synctest.Test(t, func(t *testing.T) {
		var c Clock = Real{}
		start := c.Now()
		tm := c.NewTimer(time.Second)
		<-tm.C()
		tm.Reset(time.Minute)
		<-tm.C()
		if d := c.Now().Sub(start); d != time.Second+time.Minute {
			t.Fatalf("real timer reset to a minute fired after %s", d)
		}
	})
}
