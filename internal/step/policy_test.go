package step

import (
	"fmt"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
)

// policyPage is one vLLM engine's page: its generation tokens so far, and whether it sleeps.
func policyPage(t *testing.T, gen float64, asleep bool) *page.Page {
	t.Helper()
	a, off := 1, 0
	if asleep {
		a, off = 0, 1
	}
	body := fmt.Sprintf(`vllm:num_requests_running{engine="0",model_name="m"} 1
vllm:generation_tokens_total{engine="0",model_name="m"} %v
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="awake"} %d
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="weights_offloaded"} %d
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="discard_all"} 0
`, gen, a, off)
	p, err := page.ParsePage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPolicyInferredAtSleepEnd pins the inference rule for an engine that reports no version:
// a version lands at the end of the first sleep that started after its publish, a sleep that
// started before the publish lands nothing, and each interval's tokens are stale by the
// engine's version at its start and the trainer's at its end. Each publish follows a sample, as
// the collector's follows its boundary scrape.
func TestPolicyInferredAtSleepEnd(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true})
	obs := func(ts, gen float64, asleep bool) { tr.Observe(at(ts), target, policyPage(t, gen, asleep), nil) }
	obs(0, 0, false)
	obs(1, 100, false)
	rec := tr.EndStep(1, at(1))
	for k := range rec.Metrics {
		if len(k) > 12 && k[:12] == "vllm/policy/" {
			t.Errorf("a step without a publish or an engine version has %s", k)
		}
	}
	if !tr.Publish(1, at(1.5)) {
		t.Fatal("first publish refused")
	}
	obs(2, 150, false) // stale: the engine holds a version older than 1
	obs(3, 200, false) // stale
	obs(4, 230, true)  // stale; the sleep starts after the publish
	obs(5, 230, true)
	rec = tr.EndStep(2, at(5))
	want(t, rec.Metrics, "vllm/policy/version", 1)
	want(t, rec.Metrics, "vllm/policy/engines_behind", 1)
	want(t, rec.Metrics, "vllm/policy/stale_generation_tokens", 130)
	want(t, rec.Metrics, "vllm/policy/stale_token_fraction", 1)
	absent(t, rec.Metrics, "vllm/policy/engine_version_min")
	absent(t, rec.Metrics, "vllm/policy/publish_lag_s/mean")
	absent(t, rec.PerWorker[0].Metrics, "vllm/policy/version")

	obs(6, 230, false) // the sleep ends: version 1 from here, 4.5 s after its publish
	obs(7, 300, false) // fresh
	obs(8, 320, true)  // a sleep that starts before the next publish
	if !tr.Publish(2, at(8.5)) {
		t.Fatal("publish 2 refused")
	}
	obs(9, 320, false)  // stale (nothing made); lands nothing: the sleep started before the publish
	obs(10, 360, false) // stale: version 1, the trainer's is 2
	rec = tr.EndStep(3, at(10))
	want(t, rec.Metrics, "vllm/policy/version", 2)
	want(t, rec.Metrics, "vllm/policy/engine_version_min", 1)
	want(t, rec.Metrics, "vllm/policy/engine_version_max", 1)
	want(t, rec.Metrics, "vllm/policy/engines_behind", 1)
	want(t, rec.Metrics, "vllm/policy/stale_generation_tokens", 40)
	want(t, rec.Metrics, "vllm/policy/stale_token_fraction", 40.0/130)
	want(t, rec.Metrics, "vllm/policy/publish_lag_s/mean", 4.5)
	want(t, rec.Metrics, "vllm/policy/publish_lag_s/max", 4.5)
	want(t, rec.PerWorker[0].Metrics, "vllm/policy/version", 1)
	want(t, rec.PerWorker[0].Metrics, "vllm/policy/lag", 1)

	obs(11, 400, true) // stale; a sleep after publish 2
	obs(12, 400, false)
	obs(13, 450, false)
	rec = tr.EndStep(4, at(13))
	want(t, rec.Metrics, "vllm/policy/stale_generation_tokens", 40+0)
	want(t, rec.Metrics, "vllm/policy/engines_behind", 0)
	want(t, rec.Metrics, "vllm/policy/publish_lag_s/max", 12-8.5)
	want(t, rec.PerWorker[0].Metrics, "vllm/policy/version", 2)
	want(t, rec.PerWorker[0].Metrics, "vllm/policy/lag", 0)

	// a step with no publish of its own keeps the trainer's version, and lands nothing
	obs(14, 500, false)
	rec = tr.EndStep(5, at(14))
	want(t, rec.Metrics, "vllm/policy/version", 2)
	want(t, rec.Metrics, "vllm/policy/stale_generation_tokens", 0)
	absent(t, rec.Metrics, "vllm/policy/publish_lag_s/mean")
}

// TestPolicyStates pins the bookkeeping by its explicit input, every state a sample may be in:
// a version lands at the end of each run of samples in a pause, sleep or weight load that began
// after its publish, one state's end being the next one's start.
func TestPolicyStates(t *testing.T) {
	var p policyWorker
	none := version{}
	v := func(n int64) version { return version{n: n, ok: true} }
	steps := []struct {
		s      weightState
		latest version
		gen    float64
		stale  float64
		held   version
	}{
		{stateOther, none, 0, 0, none}, // first sample: never stale
		{stateLoadingWeights, none, 10, 0, none},
		{stateOther, v(1), 10, 10, none}, // the load began before any publish; older than 1 at the end
		{stateOther, v(1), 10, 10, none},
		{stateLoadingWeights, v(1), 5, 5, none},
		{statePaused, v(2), 0, 0, v(1)}, // the load ends: 1; a pause begins after 2
		{stateAsleep, v(3), 0, 0, v(2)}, // the pause ends: 2; a sleep begins after 3
		{stateOther, v(3), 0, 0, v(3)},  // the sleep ends: 3
		{stateOther, v(3), 7, 0, v(3)},  // fresh
		{stateOther, v(4), 7, 7, v(3)},  // 4 published since the last sample: stale
	}
	for i, st := range steps {
		stale, _, after := p.sample(at(float64(i)), st.s, st.gen, true, none, st.latest, none)
		if stale != st.stale || after != st.held {
			t.Errorf("sample %d: stale %v, holds %+v; want %v, %+v", i, stale, after, st.stale, st.held)
		}
	}
	// a target that reports a version overrides the inference, and its version is held
	stale, _, after := p.sample(at(20), stateOther, 3, true, v(4), v(4), none)
	if stale != 3 || after != v(4) {
		t.Errorf("reported: stale %v, holds %+v", stale, after)
	}
	if stale, _, _ := p.sample(at(21), stateOther, 3, true, v(4), v(4), none); stale != 0 {
		t.Errorf("on the trainer's version: stale %v", stale)
	}
}

// TestPolicyReportedVersion: a target that reports its version holds it from the reading on;
// the reading comes right after its scrape, so it counts from the interval that begins there. A
// version reported before the trainer publishes it lands at the publish, with no lag.
func TestPolicyReportedVersion(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true})
	obs := func(ts, gen float64) { tr.Observe(at(ts), target, policyPage(t, gen, false), nil) }
	obs(0, 0)
	tr.EngineVersion(at(0), target, 4, true)
	obs(1, 10)
	rec := tr.EndStep(1, at(1))
	absent(t, rec.Metrics, "vllm/policy/version")
	absent(t, rec.Metrics, "vllm/policy/engines_behind")
	absent(t, rec.Metrics, "vllm/policy/stale_generation_tokens")
	want(t, rec.Metrics, "vllm/policy/engine_version_min", 4)
	want(t, rec.PerWorker[0].Metrics, "vllm/policy/version", 4)
	absent(t, rec.PerWorker[0].Metrics, "vllm/policy/lag")

	tr.Publish(5, at(1.5))
	obs(2, 20) // stale: the engine holds 4
	obs(3, 35) // stale
	tr.EngineVersion(at(3), target, 5, true)
	obs(4, 60) // fresh: the reading at 3 said 5
	tr.Publish(6, at(4.5))
	obs(5, 65)                               // stale
	tr.EngineVersion(at(5), target, 7, true) // ahead of the trainer
	tr.Publish(7, at(5.5))                   // lands at once
	obs(6, 70)                               // fresh
	rec = tr.EndStep(2, at(6))
	want(t, rec.Metrics, "vllm/policy/version", 7)
	want(t, rec.Metrics, "vllm/policy/stale_generation_tokens", 30)
	want(t, rec.Metrics, "vllm/policy/stale_token_fraction", 30.0/60)
	want(t, rec.Metrics, "vllm/policy/engines_behind", 0)
	// 5 landed 1.5 s after its publish, 6 0.5 s after, 7 at its publish
	want(t, rec.Metrics, "vllm/policy/publish_lag_s/mean", (1.5+0.5+0)/3)
	want(t, rec.Metrics, "vllm/policy/publish_lag_s/max", 1.5)
	want(t, rec.Metrics, "vllm/policy/engine_version_max", 7)

	// the target stops reporting: it holds what it reported last
	tr.EngineVersion(at(6), target, 0, false)
	obs(7, 80)
	rec = tr.EndStep(3, at(7))
	want(t, rec.PerWorker[0].Metrics, "vllm/policy/version", 7)
	want(t, rec.Metrics, "vllm/policy/stale_generation_tokens", 0)
}

// TestPolicyPublishOrder: versions only grow.
func TestPolicyPublishOrder(t *testing.T) {
	tr := NewTracker(Options{})
	if !tr.Publish(0, at(0)) || !tr.Publish(3, at(1)) {
		t.Fatal("growing versions refused")
	}
	if tr.Publish(3, at(2)) || tr.Publish(2, at(3)) {
		t.Fatal("a version not greater than the latest was taken")
	}
	rec := tr.EndStep(1, at(4))
	want(t, rec.Metrics, "vllm/policy/version", 3) // a step without engines keeps the trainer's
}

// TestPolicySGLangPaused: an SGLang worker pauses for a weight sync (paused requests): the
// version lands when the pause ends, and its keys are SGLang's.
func TestPolicySGLangPaused(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true})
	obs := func(ts, gen, paused float64) {
		body := sglangPage(sgl{gen: gen, running: 1}) + fmt.Sprintf(
			"sglang:num_paused_reqs{engine_type=\"unified\",model_name=\"m\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\"} %v\n", paused)
		p, err := page.ParsePage([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		tr.Observe(at(ts), target, p, nil)
	}
	obs(0, 0, 0)
	tr.Publish(1, at(0.5))
	obs(1, 10, 0) // stale
	obs(2, 30, 3) // stale; paused after the publish
	obs(3, 30, 0) // lands 1
	obs(4, 50, 0)
	rec := tr.EndStep(1, at(4))
	want(t, rec.Metrics, "sglang/policy/version", 1)
	want(t, rec.Metrics, "sglang/policy/stale_generation_tokens", 30)
	want(t, rec.Metrics, "sglang/policy/publish_lag_s/max", 2.5)
	want(t, rec.PerWorker[0].Metrics, "sglang/policy/version", 1)
	absent(t, rec.Metrics, "vllm/policy/version")
}

// TestPolicyPhaseName: a phase may not be named as the policy keys begin.
func TestPolicyPhaseName(t *testing.T) {
	if ValidPhase("policy") == nil {
		t.Fatal(`phase "policy" accepted: its keys would be the policy keys`)
	}
}

// TestPolicyColocatedWake: a colocated engine sleeps before the policy trains, and the new
// weights are synced into it as it wakes. The sleep began before the publish and lands nothing;
// the waking (weights back, KV cache not yet) began after it, and its end lands the version. A
// weight update the engine reports (rl_weight_update_active) is a weight load, which lands the
// next version at its end.
func TestPolicyColocatedWake(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true})
	awake := states(resources("running", "resident", "resident"), []string{"engine_fully_awake 1"})
	obs := func(ts, running, gen float64, st []string) { observeText(t, tr, ts, vpage(running, gen, st...)) }
	obs(0, 2, 0, awake)
	obs(1, 2, 100, awake)
	obs(2, 0, 100, states(resources("paused", "offloaded", "released"), []string{"engine_fully_awake 0"})) // asleep
	tr.Publish(1, at(2.5))
	obs(3, 0, 100, states(resources("paused", "offloaded", "released"), []string{"engine_fully_awake 0"}))
	obs(4, 0, 100, states(resources("paused", "resident", "released"), []string{"engine_fully_awake 0"})) // waking
	obs(5, 0, 100, states(resources("paused", "resident", "released"), []string{"engine_fully_awake 0"}))
	obs(6, 2, 100, awake) // the waking ends: 1 lands
	obs(7, 2, 180, awake) // fresh
	rec := tr.EndStep(1, at(7))
	want(t, rec.Metrics, "vllm/policy/stale_generation_tokens", 0)
	want(t, rec.PerWorker[0].Metrics, "vllm/policy/version", 1)
	want(t, rec.Metrics, "vllm/policy/publish_lag_s/max", 6-2.5)
	want(t, rec.Metrics, "vllm/policy/engines_behind", 0)

	// the next publish, while the engine generates: the update it reports lands the version
	tr.Publish(2, at(7.5))
	obs(8, 2, 250, awake) // stale until the load ends
	obs(9, 2, 300, states(awake, []string{"rl_weight_update_active{} 1"}))
	obs(10, 2, 330, awake)
	obs(11, 2, 400, awake) // fresh
	rec = tr.EndStep(2, at(11))
	want(t, rec.Metrics, "vllm/policy/stale_generation_tokens", 70+50+30)
	want(t, rec.PerWorker[0].Metrics, "vllm/policy/version", 2)
	want(t, rec.Metrics, "vllm/policy/publish_lag_s/max", 10-7.5)
}

// TestPolicySGLangTokenizer: with data parallelism SGLang counts a server's tokens in its
// tokenizer, a worker beside its DP ranks' schedulers, which pause apart. The tokenizer has no
// states: its tokens are stale by the lowest version the server's DP ranks held at its
// previous scrape, and it is no engine of the policy keys.
func TestPolicySGLangTokenizer(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true})
	obs := func(ts, gen, paused0, paused1 float64) {
		body := sglangPage(sgl{dp: "0", gen: gen, running: 1}, sgl{dp: "1", running: 1})
		for dp, p := range []float64{paused0, paused1} {
			body += fmt.Sprintf("sglang:num_paused_reqs{dp_rank=\"%d\",engine_type=\"unified\",model_name=\"m\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\"} %v\n", dp, p)
		}
		p, err := page.ParsePage([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		tr.Observe(at(ts), target, p, nil)
	}
	obs(0, 0, 0, 0)
	tr.Publish(1, at(0.5))
	obs(1, 10, 0, 0)  // stale: both ranks hold a version older than 1
	obs(2, 30, 2, 0)  // stale; rank 0 pauses
	obs(3, 30, 0, 2)  // rank 0 holds 1; rank 1 pauses
	obs(4, 50, 0, 2)  // stale: rank 1 held an older version
	obs(5, 60, 0, 0)  // stale; rank 1 holds 1
	obs(6, 100, 0, 0) // fresh
	rec := tr.EndStep(1, at(6))
	if rec.Workers != 2 || len(rec.PerWorker) != 3 {
		t.Fatalf("%d workers, %d per_worker records; want two DP ranks as engines, and the tokenizer's record beside theirs", rec.Workers, len(rec.PerWorker))
	}
	want(t, rec.Metrics, "sglang/generation_tokens", 100)
	want(t, rec.Metrics, "sglang/policy/stale_generation_tokens", 10+20+20+10)
	want(t, rec.Metrics, "sglang/policy/engines_behind", 0)
	want(t, rec.Metrics, "sglang/policy/engine_version_min", 1)
	want(t, rec.Metrics, "sglang/policy/publish_lag_s/max", 5-0.5)
	versions := 0
	for _, w := range rec.PerWorker {
		if _, ok := w.Metrics["sglang/policy/version"]; ok {
			versions++
		}
	}
	if versions != 2 {
		t.Errorf("%d workers have a version, want the two DP ranks", versions)
	}
}
