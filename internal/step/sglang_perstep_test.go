package step

import (
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
)

// SGLang's families read per step, on pages rendered by prometheus_client from SGLang's
// declarations (testdata/sglang_perstep.py, which also wrote what the step between the pages
// holds): the retracted tokens and their sum, the exact acceptance length from verify calls,
// the effective prefill tokens by tier and their shares, the forward passes' GPU time, the KV
// pool gauges and the PD transfer families.
func TestSGLangPerStepFamilies(t *testing.T) {
	var want map[string]float64
	b, err := os.ReadFile("testdata/sglang-perstep-want.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	tr := NewTracker(Options{Scalars: true, PerWorker: true})
	t0 := time.Unix(2_000_000_000, 0) // after the pages' _created
	tr.Begin(t0)
	tr.Observe(t0, "sg", readFixturePage(t, "sglang-perstep-a.prom"), nil)
	tr.Observe(t0.Add(time.Second), "sg", readFixturePage(t, "sglang-perstep-b.prom"), nil)
	r := tr.EndStep(1, t0.Add(2*time.Second))
	var busy float64
	for k, v := range want {
		if strings.HasPrefix(k, "sglang/forward_execution_seconds/") {
			busy += v
		}
	}
	want["sglang/forward_execution_seconds_per_s"] = busy / 2
	for k, v := range want {
		if got, ok := r.Metrics[k]; !ok || math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %v (%v), want %v", k, got, ok, v)
		}
	}
	// The shares of the hit tiers and of the computed tokens make the whole.
	var share float64
	for _, m := range []string{"input", "device_hit", "host_hit", "storage_hit"} {
		share += r.Metrics["sglang/prefill_effective_share/"+m]
	}
	if math.Abs(share-1) > 1e-12 {
		t.Errorf("prefill shares add up to %v", share)
	}
}

// The acceptance length from verify calls is left out when a server that verifies no drafts
// generates tokens beside one that does: its tokens are no verify pass's.
func TestSGLangAcceptLengthPaired(t *testing.T) {
	spec := func(gen, verify float64) *page.Page {
		s := sglangPage(sgl{gen: gen}) +
			"sglang:spec_verify_calls_total{engine_type=\"unified\",model_name=\"m\"} " + strconv.FormatFloat(verify, 'g', -1, 64) + "\n"
		p, err := page.ParsePage([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, mixed := range []bool{false, true} {
		tr := NewTracker(Options{})
		t0 := time.Unix(2_000_000_000, 0) // after the pages' _created
		tr.Begin(t0)
		tr.Observe(t0, "spec", spec(100, 20), nil)
		if mixed {
			tr.Observe(t0, "plain", mustSGLangPage(t, sgl{gen: 100}), nil)
		}
		tr.Observe(t0.Add(time.Second), "spec", spec(400, 120), nil)
		if mixed {
			tr.Observe(t0.Add(time.Second), "plain", mustSGLangPage(t, sgl{gen: 900}), nil)
		}
		r := tr.EndStep(1, t0.Add(2*time.Second))
		got, ok := r.Metrics["sglang/spec_decode_mean_acceptance_length"]
		switch {
		case mixed && ok:
			t.Errorf("mixed fleet: acceptance length %v, want none", got)
		case !mixed && (!ok || got != 3):
			t.Errorf("acceptance length %v (%v), want 3", got, ok)
		}
	}
}
