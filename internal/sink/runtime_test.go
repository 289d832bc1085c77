package sink

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
)

// fakeSink fails while fail reports true, can hold every Write until released, and records
// what it got and when.
type fakeSink struct {
	mu     sync.Mutex
	fail   func(attempt int) error // nil: never fails
	hold   chan struct{}           // non-nil: Write waits for it or for ctx
	delay  time.Duration           // Write takes this long, unless ctx ends first
	tries  int
	at     []time.Duration // time of each attempt since start
	start  time.Time
	got    []*step.Record
	closes atomic.Int32
}

func (f *fakeSink) Write(ctx context.Context, r *step.Record) error {
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.hold != nil {
		select {
		case <-f.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at = append(f.at, time.Since(f.start))
	f.tries++
	if f.fail != nil {
		if err := f.fail(f.tries); err != nil {
			return err
		}
	}
	f.got = append(f.got, r)
	return nil
}

func (f *fakeSink) Close(context.Context) error { f.closes.Add(1); return nil }

func (f *fakeSink) steps() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int64
	for _, r := range f.got {
		out = append(out, r.Step)
	}
	return out
}

// logs is a logger and what it wrote.
type logs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logs) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), "msg=\""+msg+"\"")
}

func newLogs() (*slog.Logger, *logs) {
	l := &logs{}
	return slog.New(slog.NewTextHandler(l, nil)), l
}

func rec(n int64) *step.Record { return &step.Record{Step: n} }

func TestRuntimeRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSink{start: time.Now(), fail: func(n int) error {
			if n <= 4 {
				return errors.New("disk full")
			}
			return nil
		}}
		rt := NewRuntime(nil)
		st := rt.Add(f, LaneOptions{Name: "t", Backoff: 100 * time.Millisecond, MaxBackoff: 500 * time.Millisecond})
		rt.Start()
		for i := int64(1); i <= 3; i++ {
			rt.Write(context.Background(), rec(i))
		}
		if err := rt.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		// 4 failures of step 1: retried after 100, 200, 400 and 500 (the cap) ms; then steps
		// 2 and 3 at once.
		want := []time.Duration{0, 100, 300, 700, 1200, 1200, 1200}
		for i := range want {
			want[i] *= time.Millisecond
		}
		if got := f.at; len(got) != len(want) || !equal(got, want) {
			t.Errorf("attempts at %v, want %v", got, want)
		}
		if s := f.steps(); len(s) != 3 || s[0] != 1 || s[2] != 3 {
			t.Errorf("steps written %v, want 1, 2, 3 in order", s)
		}
		if st.Written.Load() != 3 || st.Errors.Load() != 4 || st.Dropped.Load() != 0 || st.Queued.Load() != 0 {
			t.Errorf("written %d errors %d dropped %d queued %d", st.Written.Load(), st.Errors.Load(), st.Dropped.Load(), st.Queued.Load())
		}
	})
}

func equal(a, b []time.Duration) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

func TestRuntimeHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSink{start: time.Now(), fail: func(n int) error {
			if n == 1 {
				return RetryAfter(errors.New("HTTP 429"), 2*time.Second)
			}
			return nil
		}}
		rt := NewRuntime(nil)
		rt.Add(f, LaneOptions{Name: "t", Backoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second})
		rt.Start()
		rt.Write(context.Background(), rec(1))
		rt.Close(context.Background())
		if want := []time.Duration{0, 2 * time.Second}; !equal(f.at, want) {
			t.Errorf("attempts at %v, want %v", f.at, want)
		}
	})
}

// TestRuntimeLogsEachEpisodeOnce: a sink fails twice for a while, with steps coming all along
// and its queue filling up: each episode logs failing, dropping, recovered and caught up once.
func TestRuntimeLogsEachEpisodeOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var down atomic.Bool
		f := &fakeSink{start: time.Now(), fail: func(int) error {
			if down.Load() {
				return errors.New("tracker down")
			}
			return nil
		}}
		log, lb := newLogs()
		rt := NewRuntime(log)
		st := rt.Add(f, LaneOptions{Name: "t", Size: 2, Backoff: time.Second, MaxBackoff: time.Second})
		rt.Start()
		n := int64(0)
		steps := func(k int) {
			for range k {
				n++
				rt.Write(context.Background(), rec(n))
				time.Sleep(100 * time.Millisecond) // steps 100 ms apart against a real backoff of 1 s: the pace is the case under test
			}
		}
		for episode := 1; episode <= 2; episode++ {
			steps(3)
			down.Store(true)
			steps(40) // 4s of failing: the queue fills, later steps are dropped
			down.Store(false)
			steps(40) // recovered, and caught up
			for msg, want := range map[string]int{
				"sink failing; retrying with backoff": episode,
				"sink dropping steps":                 episode,
				"sink recovered":                      episode,
				"sink caught up":                      episode,
			} {
				if got := lb.count(msg); got != want {
					t.Errorf("after episode %d: %q logged %d times, want %d", episode, msg, got, want)
				}
			}
		}
		rt.Close(context.Background())
		if d := st.Dropped.Load(); d == 0 || st.Written.Load()+d != n {
			t.Errorf("written %d + dropped %d != %d steps", st.Written.Load(), d, n)
		}
	})
}

// TestRuntimeDrainsUntilTheDeadline: at Close, a working sink gets everything queued; a stuck
// one is abandoned at the deadline, its steps (each given one last try within lastTryTime)
// dropped and counted, and Close still closes it.
func TestRuntimeDrainsUntilTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := &fakeSink{start: time.Now()}
		stuck := &fakeSink{start: time.Now(), hold: make(chan struct{})}
		rt := NewRuntime(nil)
		okSt := rt.Add(ok, LaneOptions{Name: "ok"})
		stuckSt := rt.Add(stuck, LaneOptions{Name: "stuck"})
		rt.Start()
		for i := int64(1); i <= 5; i++ {
			rt.Write(context.Background(), rec(i))
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 10*time.Second+lastTryTime {
			t.Errorf("Close took %v, want the 10s deadline and the last tries' %v", d, lastTryTime)
		}
		if okSt.Written.Load() != 5 || len(ok.steps()) != 5 {
			t.Errorf("the working sink got %v", ok.steps())
		}
		if stuckSt.Dropped.Load() != 5 || stuckSt.Queued.Load() != 0 {
			t.Errorf("the stuck sink: dropped %d, queued %d; want 5 and 0", stuckSt.Dropped.Load(), stuckSt.Queued.Load())
		}
		if ok.closes.Load() != 1 || stuck.closes.Load() != 1 {
			t.Errorf("closed %d and %d times, want once each", ok.closes.Load(), stuck.closes.Load())
		}
	})
}

// TestRuntimeLastTryPastTheDeadline: a sink that was only slow still gets a record queued at
// the exit deadline: one attempt, within lastTryTime.
func TestRuntimeLastTryPastTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &fakeSink{start: time.Now(), delay: time.Second}
		rt := NewRuntime(nil)
		st := rt.Add(slow, LaneOptions{Name: "slow"})
		rt.Start()
		for i := int64(1); i <= 6; i++ {
			rt.Write(context.Background(), rec(i))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4500*time.Millisecond)
		defer cancel()
		rt.Close(ctx)
		// Steps 1-4 are written by 4s; step 5's write is cut by the deadline and dropped;
		// step 6 gets its last try, which takes 1s of the 2s.
		if st.Written.Load() != 5 || st.Dropped.Load() != 1 {
			t.Errorf("written %d, dropped %d; want 5 and 1", st.Written.Load(), st.Dropped.Load())
		}
		if got := slow.steps(); len(got) != 5 || got[4] != 6 {
			t.Errorf("the slow sink got steps %v, want 1-4 and 6", got)
		}
	})
}

func TestRuntimeCloseIsIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSink{}
		inline := &fakeSink{fail: func(int) error { return errors.New("encode") }}
		rt := NewRuntime(nil)
		rt.AddInline(inline)
		rt.Add(f, LaneOptions{Name: "t"})
		rt.Start()
		rt.Start() // no second set of goroutines
		if err := rt.Write(context.Background(), rec(1)); err == nil {
			t.Error("the inline sink's error was not returned")
		}
		for range 3 {
			if err := rt.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if f.closes.Load() != 1 || inline.closes.Load() != 1 {
			t.Errorf("sinks closed %d and %d times, want once", f.closes.Load(), inline.closes.Load())
		}
		if err := rt.Write(context.Background(), rec(2)); !errors.Is(err, errClosed) {
			t.Errorf("Write after Close = %v", err)
		}
		rt.Start() // after Close: starts nothing
		if s := f.steps(); len(s) != 1 {
			t.Errorf("got %v, want step 1", s)
		}
	})
}

// TestRuntimeLeavesNoGoroutine runs the runtime on real time and counts its goroutines (the
// lanes', found by their function in every goroutine's stack, so that other tests' goroutines
// coming and going do not count): Start adds one per sink and the prepare stage, Close takes
// them all back.
func TestRuntimeLeavesNoGoroutine(t *testing.T) {
	rt := NewRuntime(nil)
	for range 3 {
		rt.Add(&fakeSink{}, LaneOptions{Name: "t"})
	}
	rt.SetPrepare("p", &countingPreparer{}, 0)
	rt.Add(&fakeSink{}, LaneOptions{Name: "img", Images: true})
	if n := laneGoroutines(); n != 0 {
		t.Fatalf("%d lane goroutines before Start", n)
	}
	rt.Start()
	n := 0
	for range 1000 { // a started goroutine may take a moment to show
		if n = laneGoroutines(); n == 5 {
			break
		}
		runtime.Gosched()
	}
	if n != 5 {
		t.Errorf("%d goroutines started, want 5", n)
	}
	rt.Write(context.Background(), rec(1))
	rt.Close(context.Background())
	for range 1000 { // an exiting goroutine may take a moment to be gone
		if laneGoroutines() == 0 {
			return
		}
		runtime.Gosched()
	}
	t.Errorf("%d goroutines left after Close", laneGoroutines())
}

// laneGoroutines counts the goroutines running a lane.
func laneGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "sink.(*lane).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// countingPreparer marks each record it prepares.
type countingPreparer struct {
	calls atomic.Int32
}

func (p *countingPreparer) Prepare(_ context.Context, r *step.Record, _ int) (*step.Record, error) {
	p.calls.Add(1)
	c := *r
	c.Plots = []string{"plots/x.png"}
	return &c, nil
}

// TestRuntimePreparesOncePerRecord: the prepare stage runs once per record, however many sinks
// log images; they get its record, the others the original one, unmodified.
func TestRuntimePreparesOncePerRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &countingPreparer{}
		img1, img2, plain := &fakeSink{}, &fakeSink{}, &fakeSink{}
		rt := NewRuntime(nil)
		rt.Add(img1, LaneOptions{Name: "tensorboard", Images: true})
		rt.SetPrepare("plots", p, 0)
		rt.Add(plain, LaneOptions{Name: "remote_write"})
		rt.Add(img2, LaneOptions{Name: "wandb", Images: true})
		rt.Start()
		var in []*step.Record
		for i := int64(1); i <= 4; i++ {
			in = append(in, rec(i))
			rt.Write(context.Background(), in[i-1])
		}
		rt.Close(context.Background())
		if p.calls.Load() != 4 {
			t.Errorf("prepared %d times for 4 records", p.calls.Load())
		}
		for i := range in {
			if img1.got[i] != img2.got[i] || img1.got[i] == in[i] || len(img1.got[i].Plots) != 1 {
				t.Errorf("record %d: the image sinks did not share the prepared record", i)
			}
			if plain.got[i] != in[i] || in[i].Plots != nil {
				t.Errorf("record %d: the plain sink did not get the original, unmodified", i)
			}
		}
	})
}

// TestRuntimeWithoutPrepare: the sinks that log images get the records straight from Write.
func TestRuntimeWithoutPrepare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		img := &fakeSink{}
		rt := NewRuntime(nil)
		rt.Add(img, LaneOptions{Name: "tensorboard", Images: true})
		rt.Start()
		rt.Write(context.Background(), rec(1))
		rt.Close(context.Background())
		if s := img.steps(); len(s) != 1 {
			t.Errorf("got %v", s)
		}
	})
}

// TestRuntimeNeverBlocks: with a sink stuck, Write returns at once and drops past the queue.
func TestRuntimeNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stuck := &fakeSink{hold: make(chan struct{})}
		log, lb := newLogs()
		rt := NewRuntime(log)
		st := rt.Add(stuck, LaneOptions{Name: "t", Size: 2})
		rt.Start()
		start := time.Now()
		for i := int64(1); i <= 10; i++ {
			if err := rt.Write(context.Background(), rec(i)); err != nil {
				t.Fatal(err) // a drop is counted and logged, not returned to the collector
			}
			synctest.Wait()
		}
		if time.Since(start) != 0 {
			t.Error("Write waited for a stuck sink")
		}
		// one record is in the stuck Write, two wait in the queue
		if st.Dropped.Load() != 7 || lb.count("sink dropping steps") != 1 {
			t.Errorf("dropped %d, logged %d times; want 7, once", st.Dropped.Load(), lb.count("sink dropping steps"))
		}
		close(stuck.hold)
		rt.Close(context.Background())
		if s := stuck.steps(); len(s) != 3 || s[0] != 1 || s[2] != 3 {
			t.Errorf("got %v, want 1 2 3", s)
		}
	})
}

// TestLazyOpensOnRetry: a sink that cannot be opened at start is opened by a retry and gets
// every step.
func TestLazyOpensOnRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSink{}
		opens := 0
		l := NewLazy(func() (Sink, error) {
			if opens++; opens < 3 {
				return nil, errors.New("permission denied")
			}
			return f, nil
		})
		rt := NewRuntime(nil)
		rt.Add(l, LaneOptions{Name: "t"})
		rt.Start()
		rt.Write(context.Background(), rec(1))
		rt.Write(context.Background(), rec(2))
		rt.Close(context.Background())
		if s := f.steps(); len(s) != 2 || f.closes.Load() != 1 {
			t.Errorf("got %v, closed %d", s, f.closes.Load())
		}
	})
}
