package step

import (
	"fmt"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
)

// loadFleet is one SGLang and one vLLM target, neither reporting a version: the SGLang page
// shows a weight load only through weight_load_duration_seconds, with no pause before it.
type loadFleet struct {
	t  *testing.T
	tr *Tracker
}

const sglangTarget = "http://s:30000/metrics"

// obs scrapes both targets at ts: their generation tokens so far, and the SGLang page's load
// duration ("" for none).
func (f loadFleet) obs(ts, sglangGen, vllmGen float64, load string) {
	f.t.Helper()
	body := sglangPage(sgl{gen: sglangGen, running: 1})
	if load != "" {
		body += fmt.Sprintf("sglang:weight_load_duration_seconds{engine_type=\"unified\",model_name=\"m\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\",source=\"distributed\"} %s\n", load)
	}
	f.tr.Observe(at(ts), sglangTarget, parseText(f.t, body), nil)
	f.tr.Observe(at(ts), target, parseText(f.t, vpage(1, vllmGen)), nil)
}

// TestPolicyLoadSeenOnlyByItsLength: an SGLang load with no pause before it shows only as a new
// weight_load_duration_seconds once it is over. The load's span the ledger books (its length
// before the scrape that shows it) began after the publish, so the version lands at that
// scrape: the SGLang engine's later tokens are fresh, and its publish lag runs to that scrape.
// The vLLM engine, which neither reports a version nor pauses, stays behind.
func TestPolicyLoadSeenOnlyByItsLength(t *testing.T) {
	f := loadFleet{t, NewTracker(Options{PerWorker: true})}
	f.obs(0, 0, 0, "")
	f.obs(1, 0, 100, "")
	f.obs(1.6, 0, 160, "") // the publish's boundary scrape
	f.tr.Publish(1, at(1.6))
	f.obs(2, 0, 200, "")
	f.obs(3, 0, 300, "0.5") // a load of 0.5 s is over: booked 2.5..3, after the publish
	for i := range 4 {
		f.obs(4+float64(i), 250*float64(i+1), 400+100*float64(i), "0.5")
	}
	rec := f.tr.EndStep(1, at(7))
	want(t, rec.Metrics, "sglang/policy/version", 1)
	want(t, rec.Metrics, "sglang/policy/engines_behind", 0)
	want(t, rec.Metrics, "sglang/policy/stale_generation_tokens", 0)
	want(t, rec.Metrics, "sglang/policy/engine_version_min", 1)
	want(t, rec.Metrics, "sglang/policy/engine_version_max", 1)
	want(t, rec.Metrics, "sglang/policy/publish_lag_s/max", 3-1.6)
	want(t, rec.Metrics, "sglang/generation_tokens", 1000)
	want(t, rec.Metrics, "vllm/policy/engines_behind", 1)
	want(t, rec.Metrics, "vllm/policy/stale_generation_tokens", 700-160)
}

// TestPolicyLoadBeforePublish: a load whose booked span began before the publish began before
// it (the load ended at or before the scrape that shows it, so it began at or before its booked
// start): it loaded older weights, and lands nothing. The next load, booked after the publish,
// lands the version.
func TestPolicyLoadBeforePublish(t *testing.T) {
	f := loadFleet{t, NewTracker(Options{PerWorker: true})}
	f.obs(0, 0, 0, "")
	f.obs(1.6, 0, 0, "")
	f.tr.Publish(1, at(1.6))
	f.obs(2, 0, 0, "0.5")    // booked 1.5..2: began before the publish
	f.obs(3, 100, 0, "0.5")  // stale
	f.obs(4, 100, 0, "0.25") // booked 3.75..4: lands 1
	f.obs(5, 300, 0, "0.25") // fresh
	rec := f.tr.EndStep(1, at(5))
	want(t, rec.Metrics, "sglang/policy/stale_generation_tokens", 100)
	want(t, rec.Metrics, "sglang/policy/engines_behind", 0)
	want(t, rec.Metrics, "sglang/policy/publish_lag_s/max", 4-1.6)
	for _, w := range rec.PerWorker {
		if w.Target == sglangTarget {
			want(t, w.Metrics, "sglang/policy/version", 1)
		}
	}
}

func parseText(t *testing.T, body string) *page.Page {
	t.Helper()
	p, err := page.ParsePage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
