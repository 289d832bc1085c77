package trtllmpage

import (
	"slices"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// TestQueueTimeOfEveryRequest: trtllm-serve observes a finished request's queue time whatever
// its value (log_request_metrics_dict keeps it when it is not None, where the other latencies
// must be above 0), so a request scheduled the moment it arrived counts in
// request_queue_time_seconds with 0: after a batch without aborts the histogram has one
// observation per request, and its first request makes the family.
func TestQueueTimeOfEveryRequest(t *testing.T) {
	s := mustSim(t, trtllmConfig())
	first := familiesOf(t, firstFinish(t, s))
	if !slices.Contains(first, "trtllm_request_queue_time_seconds") {
		t.Errorf("after the first finished request, scheduled as it arrived, the page lacks the queue time: %v", first)
	}
	s.AdvanceTo(2 * time.Minute)
	g := samplesOf(t, string(s.Page(0, simtest.Start)), "finished_reason")
	finished := g["trtllm_request_success_total{stop}"] + g["trtllm_request_success_total{length}"]
	if c := g["trtllm_request_queue_time_seconds_count"]; c != finished || finished == 0 {
		t.Errorf("request_queue_time_seconds has %v observations, %v requests finished", c, finished)
	}
	if tot := s.Totals(); tot["request_queue_time_seconds_count"] != finished {
		t.Errorf("Totals count %v queue times, %v requests finished", tot["request_queue_time_seconds_count"], finished)
	}
}
