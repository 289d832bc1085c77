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

// pipeline is the stage in front of next, as the run wires it: the sink runtime runs the stage
// once per record and hands what it returns to next.
type pipeline struct {
	*sink.Runtime
	stage *Stage
	next  []*sink.Stats
}

func newPipeline(dir string, opt StageOptions, next ...sink.Sink) *pipeline {
	p := &pipeline{Runtime: sink.NewRuntime(nil), stage: NewStage(dir, opt, nil)}
	p.SetPrepare("plots", p.stage, 0)
	for _, n := range next {
		p.next = append(p.next, p.Add(n, sink.LaneOptions{Name: "next", Images: true, MaxRetries: 1, Backoff: time.Millisecond}))
	}
	p.Start()
	return p
}

func closeStage(t *testing.T, s *pipeline) {
	t.Helper()
	// The deadline only catches a hang: a close past it stops drawing, which the tests would
	// read as missing plots on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
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
			s := newPipeline(dir, tt.opt, a, b)
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
			if got := s.stage.Stats().Rendered.Load(); tt.timeline && got != 3 {
				t.Errorf("rendered %d steps, want 3", got)
			}
			if err := s.Write(context.Background(), in[0]); err == nil {
				t.Error("Write after Close succeeded")
			}
		})
	}
}

// TestStageNeverBlocks writes while the next sink hangs: every Write returns at once, steps
// with more than the backlog behind them pass without plots, and all of them arrive in order
// once the sink moves.
func TestStageNeverBlocks(t *testing.T) {
	dir := t.TempDir()
	next := &memSink{gate: make(chan struct{})}
	s := newPipeline(dir, StageOptions{Plots: true, Backlog: 2}, next)
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
	st := s.stage.Stats()
	if st.Rendered.Load()+st.Skipped.Load() != n || st.Skipped.Load() < n-3 || s.next[0].Dropped.Load() != 0 {
		t.Errorf("rendered %d skipped %d dropped %d", st.Rendered.Load(), st.Skipped.Load(), s.next[0].Dropped.Load())
	}
}

// TestStageCloseDeadline closes with an expired context while a step is still being drawn:
// Close returns without drawing the rest, drops what the next sink did not get (counted), and
// closes the next sink.
func TestStageCloseDeadline(t *testing.T) {
	next := &memSink{}
	s := newPipeline(t.TempDir(), StageOptions{Plots: true, Backlog: 8}, next)
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
	// Close waits for the image being drawn (it cannot be interrupted), never for the rest:
	// the bound only catches a Close that drew everything or hung.
	if d := time.Since(start); d > time.Minute {
		t.Errorf("Close with an expired context took %v", d)
	}
	got, dropped := int64(len(next.records())), s.next[0].Dropped.Load()
	if got+dropped != 8 || !next.closed {
		t.Errorf("next sink got %d records, %d dropped (want 8 in all), closed %v", got, dropped, next.closed)
	}
	if s.stage.Stats().Rendered.Load() == 8 {
		t.Error("every step was drawn after the deadline")
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
	s := newPipeline(dir, StageOptions{Plots: true}, &failSink{})
	s.Write(context.Background(), fleetRecord(2, 10))
	closeStage(t, s)
	if got := s.stage.Stats().Errors.Load(); got != 1 {
		t.Errorf("stage errors = %d, want 1 (the timeline file)", got)
	}
	if e, d := s.next[0].Errors.Load(), s.next[0].Dropped.Load(); e != 2 || d != 1 {
		t.Errorf("next sink: %d errors (want 2: a try and a retry), %d dropped (want 1)", e, d)
	}
}

type nopSink struct{}

func (nopSink) Write(context.Context, *step.Record) error { return nil }
func (nopSink) Close(context.Context) error               { return nil }

// BenchmarkStepClose measures what closing a step costs the collector, with plots off and on.
// One op is a stand-in for the step's aggregation (the fleet spread of one 64-worker series)
// and the hand-off of the record to the sinks: with plots off the trackers' queue directly,
// with plots on the Stage in front of it (run by the same sink runtime), which meanwhile draws 64 workers × 120 samples on
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
			s := sink.NewRuntime(nil)
			s.Add(nopSink{}, sink.LaneOptions{Name: "tracker", Size: 1 << 16, Images: true})
			if plots {
				s.SetPrepare("plots", NewStage(b.TempDir(), StageOptions{Plots: true}, nil), 1<<16)
			}
			s.Start()
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
