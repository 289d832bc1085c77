package step

import (
	"fmt"
	"testing"
)

// sgLabels are the scheduler labels of sglangPage's worker without a DP rank.
const sgLabels = `engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"`

// stagePage is sglangPage's worker w with the scheduler's stage seconds by category
// (run_batch, idle) and its idle seconds; a negative idle leaves that family out, as does nil
// stages the stage family.
func stagePage(w sgl, stages []float64, idle float64) string {
	s := sglangPage(w)
	for i, c := range stages {
		s += fmt.Sprintf("sglang:scheduler_stage_seconds_total{%s,category=%q} %v\n", sgLabels, []string{"run_batch", "idle"}[i], c)
	}
	if idle >= 0 {
		s += fmt.Sprintf("sglang:scheduler_idle_seconds_total{%s} %v\n", sgLabels, idle)
	}
	return s
}

// TestSGLangUndetermined: an SGLang page whose log-point figures were not refreshed since the
// previous one (every gauge as it was, no batch or finished request counted) cannot tell
// generating from idle: its span is undetermined. A batch counted, a gauge changed or a
// request finished says the page is the engine's again; a page showing no running requests is
// idle whatever; the first page, with nothing to compare, keeps generating.
//
//	t  page                                           state
//	1  running 2, same gauges as t0 (first compare)   undetermined
//	2  a decode batch counted                         generating
//	3  as t2                                          undetermined
//	4  as t2, token_usage changed (a log point)       generating
//	5  as t4, a request finished                      generating
//	6  as t5                                          undetermined
//	7  running 0 (the idle log point)                 idle
//	8  as t7                                          idle
func TestSGLangUndetermined(t *testing.T) {
	base := sgl{running: 2, usage: 0.5, decode: 10, req: 1, gen: 50}
	batch, logPoint, finished, idle := base, base, base, base
	batch.decode = 20
	logPoint.decode, logPoint.usage = 20, 0.6
	finished.decode, finished.usage, finished.req, finished.gen = 20, 0.6, 2, 90
	idle.decode, idle.usage, idle.req, idle.gen, idle.running = 20, 0.6, 2, 90, 0
	tr := NewTracker(Options{PerWorker: true})
	for i, w := range []sgl{base, base, batch, batch, logPoint, finished, finished, idle, idle} {
		observeText(t, tr, float64(i), sglangPage(w))
	}
	r := tr.EndStep(1, at(8))
	wantLedger(t, r.Metrics, "sglang", map[State]float64{Undetermined: 3, Generating: 3, Idle: 2})
	want(t, r.Metrics, "sglang/generation_tokens_per_generating_s", 40/3.0)

	// The first page of a worker has no page to compare with: generating.
	tr = NewTracker(Options{PerWorker: true})
	tr.Observe(at(0), target, nil, errTest)
	observeText(t, tr, 1, sglangPage(base))
	wantLedger(t, tr.EndStep(1, at(1)).Metrics, "sglang", map[State]float64{Generating: 1})

	// vLLM's gauges are the engine's at every iteration: a repeated page is generating.
	tr = NewTracker(Options{PerWorker: true})
	for i := range 3 {
		observeText(t, tr, float64(i), vpage(2, 10))
	}
	wantLedger(t, tr.EndStep(1, at(2)).Metrics, "vllm", map[State]float64{Generating: 2})
}

// TestSGLangStageSeconds: a page with the scheduler's own clock splits the engine's time by its
// counts, whatever the gauges show. SGLang adds to the counters at most once a second: a span in
// which they did not move is booked as without them, and re-split with the next span by the
// counts that cover both; a paused engine stays paused.
//
//	t  stage run_batch, idle; idle seconds   gauges        state
//	1  +0.25, +0.75; +0.75                   running 2     generating 0.25, idle 0.75
//	2  +0, +1; +1                            running 2     idle 1 (the gauges are an old log point)
//	3  no move                               running 2     undetermined, until t4
//	4  +1.5, +0.5; +0.25 (since t2: on_idle  running 2     t2..t4: generating 1.75, idle 0.25
//	   work with requests held is no idle)
//	5  +1, +0; +0                            running 0     generating 1
//	6  +0, +1; +1                            paused 3      paused
func TestSGLangStageSeconds(t *testing.T) {
	w := sgl{running: 2, decode: 10}
	stopped := w
	stopped.running = 0
	tr := NewTracker(Options{PerWorker: true})
	for i, p := range []string{
		stagePage(w, []float64{5, 5}, 5),
		stagePage(w, []float64{5.25, 5.75}, 5.75),
		stagePage(w, []float64{5.25, 6.75}, 6.75),
		stagePage(w, []float64{5.25, 6.75}, 6.75),
		stagePage(w, []float64{6.75, 7.25}, 7),
		stagePage(stopped, []float64{7.75, 7.25}, 7),
		stagePage(stopped, []float64{7.75, 8.25}, 8) + fmt.Sprintf("sglang:num_paused_reqs{%s} 3\n", sgLabels),
	} {
		observeText(t, tr, float64(i), p)
	}
	r := tr.EndStep(1, at(6))
	wantLedger(t, r.Metrics, "sglang", map[State]float64{Generating: 3, Idle: 2, Paused: 1})

	// A span of a step that ended before the counters moved keeps its state; the next step's
	// share of their move is split by it.
	tr = NewTracker(Options{PerWorker: true})
	for i, p := range []string{
		stagePage(w, []float64{1, 1}, 1),
		stagePage(w, []float64{1.5, 1.5}, 1.5),
		stagePage(w, []float64{1.5, 1.5}, 1.5),
	} {
		observeText(t, tr, float64(i), p)
	}
	wantLedger(t, tr.EndStep(1, at(2)).Metrics, "sglang", map[State]float64{Generating: 0.5, Idle: 0.5, Undetermined: 1})
	observeText(t, tr, 3, stagePage(w, []float64{2.5, 2.5}, 2.5))
	wantLedger(t, tr.EndStep(2, at(3)).Metrics, "sglang", map[State]float64{Generating: 0.5, Idle: 0.5})

	// Without scheduler_idle_seconds_total, the stage seconds' idle category is the idle
	// time; without the stage seconds, the idle seconds over the span's length.
	for _, tt := range []struct {
		name           string
		first, second  string
		generating, id float64
	}{
		{"stages only", stagePage(w, []float64{1, 1}, -1), stagePage(w, []float64{1.2, 1.8}, -1), 0.2, 0.8},
		{"idle seconds only", stagePage(w, nil, 1), stagePage(w, nil, 1.4), 0.6, 0.4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(Options{PerWorker: true})
			observeText(t, tr, 0, tt.first)
			observeText(t, tr, 1, tt.second)
			wantLedger(t, tr.EndStep(1, at(1)).Metrics, "sglang", map[State]float64{Generating: tt.generating, Idle: tt.id})
		})
	}
}
