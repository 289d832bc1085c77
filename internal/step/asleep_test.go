package step

import (
	"fmt"
	"testing"
)

// sleepPage is one engine's page with the sleep-state family: running requests and KV usage,
// and awake 1 or 0 (weights_offloaded the other way).
func sleepPage(t *testing.T, engine string, running, kv float64, awake bool) string {
	t.Helper()
	a, off := 1, 0
	if !awake {
		a, off = 0, 1
	}
	return fmt.Sprintf(`vllm:num_requests_running{engine=%[1]q,model_name="m"} %[2]v
vllm:num_requests_waiting{engine=%[1]q,model_name="m"} 0
vllm:kv_cache_usage_perc{engine=%[1]q,model_name="m"} %[3]v
vllm:engine_sleep_state{engine=%[1]q,model_name="m",sleep_state="awake"} %[4]d
vllm:engine_sleep_state{engine=%[1]q,model_name="m",sleep_state="weights_offloaded"} %[5]d
vllm:engine_sleep_state{engine=%[1]q,model_name="m",sleep_state="discard_all"} 0
`, engine, running, kv, a, off)
}

// TestAsleepSamples: a sample of a sleeping engine is neither busy nor idle and no sample of the
// load gauges, so a fleet asleep while the policy trains does not drag their means down; the
// asleep time is its own figure.
func TestAsleepSamples(t *testing.T) {
	tr := NewTracker(Options{Scalars: true, PerWorker: true})
	obs := func(ts, running, kv float64, awake bool) {
		observeText(t, tr, ts, sleepPage(t, "0", running, kv, awake))
	}
	obs(0, 0, 0, true)   // the first scrape stands for no time
	obs(1, 4, 0.5, true) // busy 1 s
	obs(2, 0, 0.1, true) // idle 1 s
	obs(3, 0, 0, false)  // asleep 1 s
	obs(4, 0, 0, false)  // asleep 1 s
	obs(5, 8, 0.9, true) // busy 1 s
	rec := tr.EndStep(1, at(5))
	want(t, rec.Metrics, "vllm/num_requests_running/mean", (0+4+0+8)/4.0)
	want(t, rec.Metrics, "vllm/kv_cache_usage_perc/mean", (0+0.5+0.1+0.9)/4)
	want(t, rec.Metrics, "vllm/worker_idle_fraction/mean", 1.0/3)
	want(t, rec.Metrics, "vllm/worker_asleep_fraction/mean", 2.0/5)
	want(t, rec.PerWorker[0].Metrics, "vllm/asleep_s", 2)
	want(t, rec.PerWorker[0].Metrics, "vllm/busy_s", 2)
	want(t, rec.PerWorker[0].Metrics, "vllm/idle_s", 1)
	absent(t, rec.Metrics, "vllm/engine_sleep_state")
}

// TestNoSleepFamilyNoAsleepKeys: pages without the family behave as before.
func TestNoSleepFamilyNoAsleepKeys(t *testing.T) {
	recs := run(t, Options{Scalars: true, PerWorker: true}, []event{
		scrape(0, eng{engine: "0", running: 0}),
		scrape(1, eng{engine: "0", running: 3}),
		end(1, 1),
	})
	absent(t, recs[0].Metrics, "vllm/worker_asleep_fraction/mean")
	absent(t, recs[0].PerWorker[0].Metrics, "vllm/asleep_s")
}
