package plot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/timeline"
)

// memSink keeps what it is given; a non-nil gate makes every Write wait until it is closed.
type memSink struct {
	mu     sync.Mutex
	gate   chan struct{}
	got    []*step.Record
	closed bool
}

func (m *memSink) Write(_ context.Context, r *step.Record) error {
	if m.gate != nil {
		<-m.gate
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, r)
	return nil
}

func (m *memSink) Close(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

func (m *memSink) records() []*step.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*step.Record(nil), m.got...)
}

func closeStage(t *testing.T, s *Stage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	default:
		t.Fatal("the stage's goroutine is still running after Close")
	}
}

func TestStage(t *testing.T) {
	for _, tt := range []struct {
		name             string
		opt              StageOptions
		timeline, images bool
	}{
		{"plots", StageOptions{Plots: true}, true, true},
		{"timelines only", StageOptions{Timelines: true}, true, false},
		{"neither", StageOptions{}, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			a, b := &memSink{}, &memSink{}
			s := NewStage(dir, tt.opt, []sink.Sink{a, b}, nil)
			var in []*step.Record
			for n := range int64(3) {
				r := fleetRecord(3, 20)
				r.Step = n + 1
				in = append(in, r)
				if err := s.Write(context.Background(), r); err != nil {
					t.Fatal(err)
				}
			}
			closeStage(t, s)
			if !a.closed || !b.closed {
				t.Error("Close did not close the next sinks")
			}
			for _, m := range []*memSink{a, b} {
				got := m.records()
				if len(got) != 3 {
					t.Fatalf("next sink got %d records, want 3", len(got))
				}
				for i, r := range got {
					if r == in[i] || r.Step != in[i].Step || r.Timeline != in[i].Timeline {
						t.Errorf("record %d: not a shallow copy of step %d", i, in[i].Step)
					}
					if in[i].Plots != nil {
						t.Errorf("the stage modified the record it was given")
					}
					if tt.images != (len(r.Plots) == 9) {
						t.Errorf("step %d: plots %v", r.Step, r.Plots)
					}
					for _, rel := range r.Plots {
						if _, err := os.Stat(filepath.Join(dir, rel)); err != nil {
							t.Error(err)
						}
					}
					_, err := os.Stat(timeline.Path(dir, r.Step))
					if tt.timeline != (err == nil) {
						t.Errorf("step %d: timeline file: %v", r.Step, err)
					}
				}
			}
			if got := s.Stats().Rendered.Load(); tt.timeline && got != 3 {
				t.Errorf("rendered %d steps, want 3", got)
			}
			if err := s.Write(context.Background(), in[0]); err == nil {
				t.Error("Write after Close succeeded")
			}
		})
	}
}

// TestStageNeverBlocks writes while the next sink hangs: every Write returns at once, steps
// past the backlog pass without plots, and all of them arrive in order once the sink moves.
func TestStageNeverBlocks(t *testing.T) {
	dir := t.TempDir()
	next := &memSink{gate: make(chan struct{})}
	s := NewStage(dir, StageOptions{Plots: true, Backlog: 2}, []sink.Sink{next}, nil)
	r := fleetRecord(4, 20)
	const n = 50
	start := time.Now()
	for i := range int64(n) {
		c := *r
		c.Step = i
		if err := s.Write(context.Background(), &c); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 10*time.Second { // a blocking Write would hang for good
		t.Errorf("%d writes took %v with the next sink hanging", n, d)
	}
	close(next.gate)
	closeStage(t, s)
	got := next.records()
	if len(got) != n {
		t.Fatalf("next sink got %d records, want %d", len(got), n)
	}
	for i, r := range got {
		if r.Step != int64(i) {
			t.Fatalf("record %d is step %d: out of order", i, r.Step)
		}
	}
	st := s.Stats()
	if st.Rendered.Load()+st.Skipped.Load() != n || st.Skipped.Load() < n-3 || st.Dropped.Load() != 0 {
		t.Errorf("rendered %d skipped %d dropped %d", st.Rendered.Load(), st.Skipped.Load(), st.Dropped.Load())
	}
}

// TestStageCloseDeadline closes with an expired context while a step is still being drawn: Close
// returns, passes the rest on without drawing, and closes the next sinks.
func TestStageCloseDeadline(t *testing.T) {
	next := &memSink{}
	s := NewStage(t.TempDir(), StageOptions{Plots: true, Backlog: 8}, []sink.Sink{next}, nil)
	for i := range int64(8) {
		r := fleetRecord(64, 120)
		r.Step = i
		s.Write(context.Background(), r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Close waits for the drawing in progress (it cannot be interrupted), never for the rest:
	// the bound only catches a Close that drew everything or hung.
	if d := time.Since(start); d > time.Minute {
		t.Errorf("Close with an expired context took %v", d)
	}
	if len(next.records()) != 8 || !next.closed {
		t.Errorf("next sink got %d records, closed %v", len(next.records()), next.closed)
	}
	if s.Stats().Skipped.Load() == 0 {
		t.Error("no step was skipped after the deadline")
	}
}

type failSink struct{ memSink }

func (f *failSink) Write(context.Context, *step.Record) error { return errors.New("tracker down") }

func TestStageErrors(t *testing.T) {
	dir := t.TempDir()
	// A file where the timelines folder should be makes every timeline write fail.
	if err := os.WriteFile(filepath.Join(dir, timeline.Dir), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewStage(dir, StageOptions{Plots: true}, []sink.Sink{&failSink{}}, nil)
	s.Write(context.Background(), fleetRecord(2, 10))
	closeStage(t, s)
	if got := s.Stats().Errors.Load(); got != 2 {
		t.Errorf("errors = %d, want 2 (the timeline file and the next sink)", got)
	}
}

type nopSink struct{}

func (nopSink) Write(context.Context, *step.Record) error { return nil }
func (nopSink) Close(context.Context) error               { return nil }

// BenchmarkStepClose measures what closing a step costs the collector, with plots off and on.
// One op is a stand-in for the step's aggregation (the fleet spread of one 64-worker series)
// and the hand-off of the record to the sinks: with plots off the trackers' queue directly,
// with plots on the Stage in front of it, which meanwhile draws 64 workers × 120 samples on
// the same cores (and passes steps on undrawn when it falls behind, as it does here).
// Steps close back to back here, so the Stage is always drawing while the next one closes: the
// worst case for the cores, which real steps (seconds, against a quarter of a second to draw
// one) do not reach. write_p50_ns and write_p99_ns are the hand-off alone.
//
//	go test ./internal/plot -run '^$' -bench StepClose -count 6 | tee new.txt; benchstat new.txt
func BenchmarkStepClose(b *testing.B) {
	r := fleetRecord(64, 120)
	var kv [][]step.Point
	for _, w := range r.Timeline.Workers {
		kv = append(kv, w.Series["kv_cache_usage_perc"])
	}
	for _, plots := range []bool{false, true} {
		b.Run(fmt.Sprintf("plots=%v", plots), func(b *testing.B) {
			q := sink.NewQueue(nopSink{}, sink.QueueOptions{Name: "tracker", Size: 1 << 16})
			var s sink.Sink = q
			if plots {
				s = NewStage(b.TempDir(), StageOptions{Plots: true, Queue: 1 << 16}, []sink.Sink{q}, nil)
			}
			ctx := context.Background()
			var writes []time.Duration
			b.ReportAllocs()
			i := int64(0)
			for b.Loop() {
				i++
				c := *r
				c.Step = i
				c.Metrics = map[string]float64{"vllm/kv_cache_usage_perc/p95": timeline.Spread(timeline.Grid(kv, r.DurationS, 120)).P95[60]}
				t0 := time.Now()
				if err := s.Write(ctx, &c); err != nil {
					b.Fatal(err)
				}
				writes = append(writes, time.Since(t0))
			}
			slices.Sort(writes)
			b.ReportMetric(float64(writes[len(writes)/2].Nanoseconds()), "write_p50_ns")
			b.ReportMetric(float64(writes[len(writes)*99/100].Nanoseconds()), "write_p99_ns")
			b.StopTimer()
			ctx, cancel := context.WithTimeout(ctx, time.Millisecond)
			defer cancel()
			s.Close(ctx)
		})
	}
}
