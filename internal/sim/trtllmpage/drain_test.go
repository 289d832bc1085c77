package trtllmpage

import (
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// TestGaugesFollowIterationsWhileDraining: trtllm-serve's collector, woken by a request's
// finish, drains the executor's iteration statistics until none came for half a second
// (OpenAIServer._iteration_stats_collector_loop, get_stats_async(timeout=0.5)), logging each. So
// from a batch's first finish on, the page's gauges follow every iteration, those in which no
// request finished too; after the batch and the trainer's 2 s pause, the next batch's
// iterations are not logged until its first request finishes: its first page still shows the
// end of the previous batch. The prefilled tokens of iterations without a finish are observed too.
func TestGaugesFollowIterationsWhileDraining(t *testing.T) {
	cfg := trtllmConfig()
	cfg.Workload.Batches = 2
	s := mustSim(t, cfg)
	e := s.Engines[0]
	tr := &e.Stats.Trt
	var (
		last          snap.TrtllmIteration
		lastCompleted int64
		withoutFinish int  // logged iterations that changed the gauges with no request finished
		batches       int  // busy periods begun
		busy          bool // the engine was busy at the previous look
		heldAtStart   bool // the second batch's iterations before its first finish left the gauges
		prefilled     uint64
		prefillLogged int // prefilled tokens observed with no request finished
	)
	for at := time.Millisecond; at < 3*time.Minute; at += time.Millisecond {
		s.AdvanceTo(at)
		if b := e.Busy(); b != busy {
			busy = b
			if b {
				batches++
				if batches == 2 {
					heldAtStart = true
				}
			}
		}
		if tr.First.Iteration == 0 {
			continue
		}
		if tr.Logged != last {
			if tr.Completed == lastCompleted {
				withoutFinish++
			}
			if batches == 2 && tr.Completed == lastCompleted && heldAtStart {
				t.Errorf("at %s the second batch's iterations were logged before its first finish: %+v", at, tr.Logged)
			}
		}
		if batches == 2 && tr.Completed != lastCompleted {
			heldAtStart = false
		}
		if tr.PrefillBatchTokens.Count != prefilled && tr.Completed == lastCompleted {
			prefillLogged++
		}
		last, lastCompleted = tr.Logged, tr.Completed
		prefilled = tr.PrefillBatchTokens.Count
	}
	if batches != 2 || e.Busy() {
		t.Fatalf("%d batches begun, busy %v: want both batches over", batches, e.Busy())
	}
	if withoutFinish == 0 {
		t.Error("no iteration without a finish was logged: the gauges held between finishes while the collector drained")
	}
	if prefillLogged == 0 {
		t.Error("no iteration's prefilled tokens were observed without a finish: only the finishing iterations were")
	}
}
