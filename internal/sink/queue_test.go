package sink

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
)

// flaky fails its first n writes, and can block until released.
type flaky struct {
	mu     sync.Mutex
	fails  int
	got    []int64
	block  chan struct{}
	closed bool
}

func (f *flaky) Write(_ context.Context, r *step.Record) error {
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails > 0 {
		f.fails--
		return errors.New("disk full")
	}
	f.got = append(f.got, r.Step)
	return nil
}

func (f *flaky) Close(context.Context) error { f.closed = true; return nil }

func TestQueueRetriesInOrder(t *testing.T) {
	f := &flaky{fails: 3}
	q := NewQueue(f, QueueOptions{Name: "t", Backoff: time.Millisecond})
	for i := int64(1); i <= 5; i++ {
		if err := q.Write(context.Background(), &step.Record{Step: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(f.got) != 5 || f.got[0] != 1 || f.got[4] != 5 || !f.closed {
		t.Fatalf("got %v closed %v", f.got, f.closed)
	}
	if q.Stats().Errors.Load() != 3 || q.Stats().Dropped.Load() != 0 || q.Stats().Written.Load() != 5 {
		t.Fatalf("stats errors %d dropped %d written %d", q.Stats().Errors.Load(), q.Stats().Dropped.Load(), q.Stats().Written.Load())
	}
}

func TestQueueNeverBlocksWhenFull(t *testing.T) {
	f := &flaky{block: make(chan struct{})}
	q := NewQueue(f, QueueOptions{Name: "t", Size: 2})
	start := time.Now()
	var dropped int
	for i := int64(1); i <= 10; i++ {
		if q.Write(context.Background(), &step.Record{Step: i}) != nil {
			dropped++
		}
	}
	if time.Since(start) > time.Second {
		t.Fatal("Write blocked on a stuck sink")
	}
	// one record is in the stuck Write, two wait in the queue
	if dropped < 7 || q.Stats().Dropped.Load() != int64(dropped) {
		t.Fatalf("dropped %d (stats %d), want at least 7", dropped, q.Stats().Dropped.Load())
	}
	close(f.block)
	q.Close(context.Background())
	if len(f.got)+dropped != 10 {
		t.Fatalf("written %d + dropped %d != 10", len(f.got), dropped)
	}
}

func TestQueueCloseDeadline(t *testing.T) {
	f := &flaky{fails: 1 << 30}
	q := NewQueue(f, QueueOptions{Name: "t", Backoff: time.Hour})
	q.Write(context.Background(), &step.Record{Step: 1})
	q.Write(context.Background(), &step.Record{Step: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() { q.Close(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after its deadline")
	}
	if q.Stats().Dropped.Load() != 2 {
		t.Fatalf("dropped %d, want 2", q.Stats().Dropped.Load())
	}
}
