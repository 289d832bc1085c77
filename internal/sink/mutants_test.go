package sink

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestRuntimeMaxRetries: a sink that always fails, with MaxRetries 2, is tried three times (the
// first try and two retries), and then the record is given up and counted as dropped.
func TestRuntimeMaxRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSink{start: time.Now(), fail: func(int) error { return errors.New("refused") }}
		rt := NewRuntime(nil)
		st := rt.Add(f, LaneOptions{Name: "t", MaxRetries: 2, Backoff: time.Millisecond, MaxBackoff: time.Millisecond})
		rt.Start()
		rt.Write(context.Background(), rec(1))
		rt.Close(context.Background())
		if e, d, w := st.Errors.Load(), st.Dropped.Load(), st.Written.Load(); e != 3 || d != 1 || w != 0 {
			t.Fatalf("errors %d dropped %d written %d, want 3, 1, 0", e, d, w)
		}
	})
}

// TestRuntimeClosedBeforeStart: records written to a runtime that was never started are not
// delivered (no goroutine ever ran), and Close counts them as dropped, never silently lost.
func TestRuntimeClosedBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSink{start: time.Now()}
		rt := NewRuntime(nil)
		st := rt.Add(f, LaneOptions{Name: "t"})
		rt.Write(context.Background(), rec(1))
		rt.Write(context.Background(), rec(2))
		rt.Close(context.Background())
		if d, w, q := st.Dropped.Load(), st.Written.Load(), st.Queued.Load(); d != 2 || w != 0 || q != 0 || len(f.steps()) != 0 {
			t.Fatalf("dropped %d written %d queued %d, sink got %v; want both records dropped", d, w, q, f.steps())
		}
	})
}
