package termline

import (
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
)

// TestRayReplicasHaveLinesOfTheirOwn: two Ray replicas with engine "0" on one target are two
// workers, each named by its worker labels; in a narrow label column the part they share goes.
func TestRayReplicasHaveLinesOfTheirOwn(t *testing.T) {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	const tg = "http://10.0.0.5:8080/metrics"
	r := &step.Record{Step: 1, Start: start, End: start.Add(4 * time.Second), DurationS: 4,
		Timeline: &step.Timeline{Start: start, Workers: []step.WorkerTimeline{
			{WorkerID: step.WorkerID{Target: tg, Engine: "0", Labels: `ReplicaId="k7qz2m1d"`}, Series: map[string][]step.Point{"num_requests_running": {{OffsetS: 1, Value: 3}, {OffsetS: 3, Value: 4}}}},
			{WorkerID: step.WorkerID{Target: tg, Engine: "0", Labels: `ReplicaId="p3xw9c4e"`}, Series: map[string][]step.Point{"num_requests_running": {{OffsetS: 1, Value: 5}, {OffsetS: 3, Value: 6}}}},
		}}}
	text := strings.Join(Lines(r, Options{Width: 100, Metrics: []string{"num_requests_running"}}), "\n")
	for _, name := range []string{"…k7qz2m1d] │", "…p3xw9c4e] │"} {
		if strings.Count(text, name) != 1 {
			t.Errorf("lines name %s %d times, want once:\n%s", name, strings.Count(text, name), text)
		}
	}
}
