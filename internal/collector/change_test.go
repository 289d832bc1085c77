package collector

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/target"
)

// quietState is a collector's state, without its goroutine, whose targets never answer.
func quietState(t *testing.T) (*state, *clock.Fake) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := New(Options{Options: scrape.Options{Timeout: 5 * time.Second, Clock: fc}, Interval: time.Second})
	st := newState(c)
	st.pool = scrape.NewPool(scrape.Options{Timeout: 5 * time.Second, Client: &http.Client{Transport: blockingTransport{}}}, make(chan scrape.Result, 1))
	t.Cleanup(st.pool.Close)
	return st, fc
}

func manyTargets(from, to int) []target.Target {
	ts := make([]target.Target, 0, to-from)
	for i := from; i < to; i++ {
		ts = append(ts, target.Target{URL: fmt.Sprintf("http://10.0.%d.%d:8000/metrics", i>>8, i&255)})
	}
	return ts
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestLargeChangeInBatches: a change of more targets than a batch is applied a batch at a time
// (removals first), each call of applyMore one more; a newer change replaces the rest of the
// one in progress, and both are done once it is applied.
func TestLargeChangeInBatches(t *testing.T) {
	st, _ := quietState(t)
	all := manyTargets(0, 2*applyBatch+7)
	done := st.setTargets(all)
	if n := len(st.pool.Targets()); n != applyBatch || isClosed(done) {
		t.Fatalf("after the first batch: %d targets, done %v; want %d, not done", n, isClosed(done), applyBatch)
	}
	if st.moreC() == nil {
		t.Fatal("no more work while a change is in progress")
	}
	st.applyMore()
	st.applyMore()
	if n := len(st.pool.Targets()); n != len(all) || !isClosed(done) || st.pending != nil || st.moreC() != nil {
		t.Fatalf("after three batches: %d targets, done %v; want %d, done", n, isClosed(done), len(all))
	}
	if n := len(st.targets); n != len(all) {
		t.Fatalf("%d target states, want %d", n, len(all))
	}

	// Keep the first 10, add 3 new: the removals go first, and a newer change takes over.
	next := append(slices.Clone(all[:10]), manyTargets(5000, 5003)...)
	first := st.setTargets(all[:5]) // more removals than a batch
	if isClosed(first) {
		t.Fatal("a change of more than a batch done at once")
	}
	second := st.setTargets(next)
	for i := 0; st.pending != nil; i++ {
		if i > 10 {
			t.Fatal("the change never ends")
		}
		st.applyMore()
	}
	got := st.pool.Targets()
	want := make([]string, len(next))
	for i, tg := range next {
		want[i] = tg.URL
	}
	if !slices.Equal(got, want) || !isClosed(first) || !isClosed(second) || len(st.targets) != len(next) {
		t.Fatalf("targets %d %v…, first done %v, second done %v; want %d %v…, both done",
			len(got), got[:min(3, len(got))], isClosed(first), isClosed(second), len(want), want[:3])
	}
}

// TestRemovedForgottenAfterGrace: removed targets are forgotten once their grace period (two
// intervals) is over, a batch at a time; one that came back within it is not.
func TestRemovedForgottenAfterGrace(t *testing.T) {
	st, fc := quietState(t)
	all := manyTargets(0, applyBatch+5)
	for st.setTargets(all); st.pending != nil; {
		st.applyMore()
	}
	for st.setTargets(nil); st.pending != nil; {
		st.applyMore()
	}
	if len(st.removedAt) != len(all) {
		t.Fatalf("%d removed targets waiting, want %d", len(st.removedAt), len(all))
	}
	back := st.setTargets(all[:1]) // back within its grace period
	if !isClosed(back) || len(st.removedAt) != len(all)-1 {
		t.Fatalf("back: done %v, %d waiting; want done, %d", isClosed(back), len(st.removedAt), len(all)-1)
	}
	fc.Advance(2*time.Second - time.Nanosecond)
	st.forgetExpired()
	if len(st.removedAt) != len(all)-1 || st.forgetMore {
		t.Fatalf("before the grace period is over: %d waiting, more %v", len(st.removedAt), st.forgetMore)
	}
	fc.Advance(time.Nanosecond)
	st.forgetExpired()
	if len(st.removedAt) != 4 || !st.forgetMore || st.moreC() == nil {
		t.Fatalf("after one batch: %d waiting, more %v; want 4, more", len(st.removedAt), st.forgetMore)
	}
	st.applyMore()
	if len(st.removedAt) != 0 || st.forgetMore || len(st.forgetQueue) != 0 || st.moreC() != nil {
		t.Fatalf("after two batches: %d waiting, %d queued, more %v; want none", len(st.removedAt), len(st.forgetQueue), st.forgetMore)
	}
}

// TestSettleAtShutdown: at shutdown, the removals of a change in progress take effect at once
// (before the last boundary scrape) and its additions are dropped.
func TestSettleAtShutdown(t *testing.T) {
	st, _ := quietState(t)
	for st.setTargets(manyTargets(0, 2*applyBatch)); st.pending != nil; {
		st.applyMore()
	}
	st.setTargets(manyTargets(2*applyBatch, 4*applyBatch))
	if st.pending == nil {
		t.Fatal("no change in progress")
	}
	st.settle()
	if n := len(st.pool.Targets()); n != 0 || st.pending != nil || len(st.targets) != 0 {
		t.Fatalf("%d targets, change in progress %v; want none, none", n, st.pending != nil)
	}
}
