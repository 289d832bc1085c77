package step

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// vpage is engine "0"'s page: its running requests, generated tokens, and the lines of state
// families given as name{labels} value, without the engine and model_name labels, which it adds.
func vpage(running, gen float64, states ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} %v\n", running)
	fmt.Fprintf(&b, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} %v\n", gen)
	for _, s := range states {
		name, rest, ok := strings.Cut(s, "{")
		if !ok {
			name, rest, _ = strings.Cut(s, " ")
			rest = "} " + rest
		} else if !strings.HasPrefix(rest, "}") {
			rest = "," + rest
		}
		fmt.Fprintf(&b, "vllm:%s{engine=\"0\",model_name=\"m\"%s\n", name, rest)
	}
	return b.String()
}

// resources are the lines of vLLM's resource states: the scheduler's, the weights' and the KV
// cache's current states.
func resources(sched, weights, kv string) []string {
	var out []string
	for _, r := range []struct {
		name, cur string
		states    []string
	}{{"scheduler", sched, []string{"running", "paused"}}, {"weights", weights, []string{"resident", "offloaded", "discarded", "unknown"}},
		{"kv_cache", kv, []string{"resident", "released", "unknown"}}} {
		for _, s := range r.states {
			v := 0
			if s == r.cur {
				v = 1
			}
			out = append(out, fmt.Sprintf("engine_sleep_resource_state{resource=%q,state=%q} %d", r.name, s, v))
		}
	}
	return out
}

func states(lines ...[]string) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l...)
	}
	return out
}

// wantLedger checks the ledger's keys under prefix in m: each state's seconds (absent ones 0),
// engine_s their sum, and the fractions.
func wantLedger(t *testing.T, m map[string]float64, prefix string, secs map[State]float64) {
	t.Helper()
	var engine float64
	for _, v := range secs {
		engine += v
	}
	want(t, m, prefix+"/"+NameEngineTime, engine)
	for s := range NumStates {
		if s == Undetermined && prefix != "sglang" && prefix != "trtllm" { // a state of SGLang's and TensorRT-LLM's pages alone
			absent(t, m, prefix+"/"+StateKey(s))
			absent(t, m, prefix+"/"+FractionKey(s))
			continue
		}
		want(t, m, prefix+"/"+StateKey(s), secs[s])
		want(t, m, prefix+"/"+FractionKey(s), secs[s]/engine)
	}
}

// TestLedgerByHand: a vLLM engine scraped once a second through every state, each sample
// standing for the second before it.
//
//	t  page                                                      state
//	1  running 3                                                 generating
//	2  running 0                                                 idle
//	3  failed scrape                                             unreachable
//	4  weights offloaded, KV released (sleep level 1)            asleep
//	5  scheduler paused, weights resident, KV released, not awake waking
//	6  the same, and a weight update active                      loading_weights (over waking)
//	7  all back, fully awake, engine_pause_state 1               paused
//	8  scheduler paused, weights resident (no sleep before)      paused (a pause, not a wake)
//	9  all back, running 2                                       generating
//	10 engine_sleep_state awake 0, all back otherwise            idle (the resource states tell)
//	11 awake 1                                                   idle
//
// vLLM sets the legacy awake flag to the fully-awake predicate, so a page with the resource
// states is read by them: awake 0 beside resident weights is no sleep.
//
// The phase rollout covers the samples at 5 to 9; step 2's target fails every scrape, which is
// unreachable time of the fleet though the worker has no per_worker record, and of the phase
// open then.
func TestLedgerByHand(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true})
	awake := []string{"engine_fully_awake 1"}
	notAwake := []string{"engine_fully_awake 0"}
	legacy := func(a int) []string {
		return []string{fmt.Sprintf("engine_sleep_state{sleep_state=\"awake\"} %d", a), fmt.Sprintf("engine_sleep_state{sleep_state=\"weights_offloaded\"} %d", 1-a)}
	}
	for _, s := range []struct {
		ts  float64
		pg  string // "" for a failed scrape
		run func()
	}{
		{ts: 0, pg: vpage(0, 0)},
		{ts: 1, pg: vpage(3, 100)},
		{ts: 2, pg: vpage(0, 100)},
		{ts: 3},
		{ts: 4, pg: vpage(0, 100, states(resources("paused", "offloaded", "released"), notAwake)...)},
		{ts: 5, pg: vpage(0, 100, states(resources("paused", "resident", "released"), notAwake)...)},
		{ts: 6, pg: vpage(0, 100, states(resources("paused", "resident", "released"), notAwake, []string{"rl_weight_update_active{} 1"})...)},
		{ts: 7, pg: vpage(0, 100, states(resources("running", "resident", "resident"), awake, []string{"engine_pause_state 1"})...)},
		{ts: 8, pg: vpage(0, 100, states(resources("paused", "resident", "resident"), notAwake)...)},
		{ts: 9, pg: vpage(2, 300, states(resources("running", "resident", "resident"), awake)...)},
		{ts: 10, pg: vpage(0, 300, states(resources("running", "resident", "resident"), awake, legacy(0))...)},
		{ts: 11, pg: vpage(0, 300, states(resources("running", "resident", "resident"), awake, legacy(1))...)},
	} {
		if s.pg == "" {
			tr.Observe(at(s.ts), target, nil, errTest)
		} else {
			observeText(t, tr, s.ts, s.pg)
		}
		switch s.ts {
		case 4:
			tr.StartPhase("rollout", at(4))
		case 9:
			tr.EndPhase("rollout", at(9))
		}
	}
	r := tr.EndStep(1, at(11))
	step1 := map[State]float64{Generating: 2, Idle: 3, Unreachable: 1, Asleep: 1, Waking: 1, LoadingWeights: 1, Paused: 2}
	wantLedger(t, r.Metrics, "vllm", step1)
	wantLedger(t, r.PerWorker[0].Metrics, "vllm", step1)
	want(t, r.Metrics, "vllm/generation_tokens_per_generating_s", 300/2.0)
	absent(t, r.Metrics, "vllm/prompt_tokens_per_generating_s") // no prompt_tokens on the page
	rollout := r.Phases["rollout"].Metrics
	wantLedger(t, rollout, "vllm", map[State]float64{Waking: 1, LoadingWeights: 1, Paused: 2, Generating: 1})
	want(t, rollout, "vllm/generation_tokens_per_generating_s", 200)
	// the old keys keep their meaning: the asleep sample of the resource states alone is busy or
	// idle there (idle here), and only engine_sleep_state's asleep sample is asleep
	want(t, r.PerWorker[0].Metrics, "vllm/asleep_s", 1)

	tr.Observe(at(12), target, nil, errTest)
	tr.StartPhase("eval", at(12))
	tr.Observe(at(13.5), target, nil, errTest)
	r = tr.EndStep(2, at(13.5))
	if r.Workers != 0 || len(r.PerWorker) != 0 {
		t.Errorf("step 2: %d workers, %d per_worker records; want none", r.Workers, len(r.PerWorker))
	}
	wantLedger(t, r.Metrics, "vllm", map[State]float64{Unreachable: 2.5})
	wantLedger(t, r.Phases["eval"].Metrics, "vllm", map[State]float64{Unreachable: 1.5})
	absent(t, r.Metrics, "vllm/generation_tokens_per_generating_s")
}

// TestLedgerWakingByFullyAwake: a page with engine_sleep_state and engine_fully_awake (no
// resource states) is waking from its first awake sample after a sleep until fully awake;
// with engine_sleep_state alone, waking does not show and that time is idle.
func TestLedgerWakingByFullyAwake(t *testing.T) {
	for _, withFully := range []bool{true, false} {
		tr := NewTracker(Options{})
		for i, st := range []struct{ awake, fully int }{{1, 1}, {0, 0}, {1, 0}, {1, 0}, {1, 1}} {
			lines := []string{fmt.Sprintf("engine_sleep_state{sleep_state=\"awake\"} %d", st.awake)}
			if withFully {
				lines = append(lines, fmt.Sprintf("engine_fully_awake %d", st.fully))
			}
			observeText(t, tr, float64(i), vpage(0, 0, lines...))
		}
		r := tr.EndStep(1, at(4))
		if withFully {
			wantLedger(t, r.Metrics, "vllm", map[State]float64{Asleep: 1, Waking: 2, Idle: 1})
		} else {
			wantLedger(t, r.Metrics, "vllm", map[State]float64{Asleep: 1, Idle: 3})
		}
	}
}

// TestSGLangLoadReattributed: SGLang's weight_load_duration_seconds gives a load's length when
// it ends; that span before the scrape is re-attributed to loading_weights, clipped to the step
// and the phase, taken from the states it had but unreachable. Scrapes once a second:
//
//	t  page                                   booked            after the loads
//	1  running 2                              generating
//	2  running 0                              idle
//	3  failed                                 unreachable
//	4  num_paused_reqs 3                      paused            loading
//	5  running 1                              generating        loading
//	6  load distributed 3.5 s appears         idle              loading: (2.5, 6], not (2.5, 3]
//	7  the same value, running 1              generating
//	8  load distributed 0.25 s                idle              (7.75, 8] loading
//
// The phase rollout opens after the scrape at 4; step 2 has a load longer than the step.
func TestSGLangLoadReattributed(t *testing.T) {
	lbl := `engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"`
	pg := func(running, paused float64, load string) string {
		s := sglangPage(sgl{running: running, gen: 10 * running})
		s += fmt.Sprintf("sglang:num_paused_reqs{%s} %v\n", lbl, paused)
		if load != "" {
			s += fmt.Sprintf("sglang:weight_load_duration_seconds{%s,source=\"distributed\"} %s\n", lbl, load)
		}
		return s
	}
	tr := NewTracker(Options{PerWorker: true})
	for _, s := range []struct {
		ts float64
		pg string
	}{
		{0, pg(2, 0, "")}, {1, pg(3, 0, "")}, {2, pg(0, 0, "")}, {3, ""}, {4, pg(0, 3, "")}, {5, pg(1, 0, "")},
		{6, pg(0, 0, "3.5")}, {7, pg(1, 0, "3.5")}, {8, pg(0, 0, "0.25")},
		{9, pg(1, 0, "0.25")}, {10, pg(0, 0, "100")},
	} {
		if s.pg == "" {
			tr.Observe(at(s.ts), target, nil, errTest)
		} else {
			observeText(t, tr, s.ts, s.pg)
		}
		switch s.ts {
		case 4:
			tr.StartPhase("rollout", at(4))
		case 8:
			r := tr.EndStep(1, at(8))
			step1 := map[State]float64{Generating: 2, Idle: 1.75, Unreachable: 1, LoadingWeights: 3.25}
			wantLedger(t, r.Metrics, "sglang", step1)
			wantLedger(t, r.PerWorker[0].Metrics, "sglang", step1)
			wantLedger(t, r.Phases["rollout"].Metrics, "sglang", map[State]float64{Generating: 1, Idle: 0.75, LoadingWeights: 2.25})
		}
	}
	r := tr.EndStep(2, at(10))
	wantLedger(t, r.Metrics, "sglang", map[State]float64{LoadingWeights: 2})
	wantLedger(t, r.Phases["rollout"].Metrics, "sglang", map[State]float64{LoadingWeights: 2})
}

// TestLedgerEnginesOnly: SGLang's tokenizer of a data-parallel server, a worker with counters
// and no running gauge, is no engine; a worker counts from the first page that shows it is one.
func TestLedgerEnginesOnly(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true})
	for i := range 3 {
		tr.Observe(at(float64(i)), target, mustSGLangPage(t, sgl{dp: "0", running: 1, gen: float64(100 * i), decode: float64(100 * i)}, sgl{dp: "1"}), nil)
	}
	countersOnly := "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 5\n"
	tr.Observe(at(0), "v", mustPageText(countersOnly), nil)
	tr.Observe(at(1), "v", mustPageText(countersOnly), nil)
	tr.Observe(at(2), "v", mustPageText(vpage(1, 7)), nil)
	r := tr.EndStep(1, at(2))
	wantLedger(t, r.Metrics, "sglang", map[State]float64{Generating: 2, Idle: 2})
	want(t, r.Metrics, "sglang/generation_tokens_per_generating_s", 200/2.0)
	wantLedger(t, r.Metrics, "vllm", map[State]float64{Generating: 1})
	for _, w := range r.PerWorker {
		prefix := "sglang/"
		if w.Target == "v" {
			prefix = "vllm/"
		}
		_, has := w.Metrics[prefix+NameEngineTime]
		if tokenizer := w.Target == target && w.Labels == nil; tokenizer == has {
			t.Errorf("worker %s %v: ledger keys %v", w.Target, w.Labels, has)
		}
	}
}

// TestOldKeysAreLedgerViews: the fleet-balance keys that predate the ledger keep their values,
// and on pages whose every sample has the running gauge and no state family but
// engine_sleep_state, they are views of it, to the nanosecond per worker:
//
//	asleep_s = time/asleep_s
//	busy_s + idle_s = time/generating_s + time/idle_s
//	busy_s = time/generating_s + the time of samples with no request running and some waiting
//
// (a failed scrape's time is unreachable, and no sample's in the old keys).
func TestOldKeysAreLedgerViews(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 0x01d))
		tr := NewTracker(Options{PerWorker: true})
		type wk struct {
			engine string
			sleeps bool
		}
		ws := []wk{{"0", true}, {"1", false}}
		waitingOnly := map[string]time.Duration{}
		now := t0
		var prev, stepStart time.Time
		check := func() {
			for _, w := range ws {
				wa := tr.open.workers[WorkerID{Target: target, Engine: w.engine}]
				if wa == nil {
					continue
				}
				a, l := &wa.act, &wa.led
				if int64(a.asleep) != l.ns[Asleep] || int64(a.busy+a.idle) != l.ns[Generating]+l.ns[Idle] ||
					int64(a.busy) != l.ns[Generating]+int64(waitingOnly[w.engine]) {
					t.Fatalf("seed %d worker %s: busy %v idle %v asleep %v, ledger %v, waiting alone %v", seed, w.engine, a.busy, a.idle, a.asleep, l.ns, waitingOnly[w.engine])
				}
			}
		}
		for tick := range 80 {
			now = now.Add(time.Duration(1e6 + rng.Int64N(1e9)))
			if tick > 0 && rng.IntN(8) == 0 {
				tr.Observe(now, target, nil, errTest)
				prev = now
				continue
			}
			var b strings.Builder
			for _, w := range ws {
				if rng.IntN(10) == 0 {
					continue // not on this page
				}
				running, waiting := float64(rng.IntN(3)), float64(rng.IntN(3))
				asleep := w.sleeps && rng.IntN(4) == 0
				fmt.Fprintf(&b, "vllm:num_requests_running{engine=%q} %v\nvllm:num_requests_waiting{engine=%q} %v\n", w.engine, running, w.engine, waiting)
				if w.sleeps {
					a := 1
					if asleep {
						a = 0
					}
					fmt.Fprintf(&b, "vllm:engine_sleep_state{engine=%q,sleep_state=\"awake\"} %d\n", w.engine, a)
				}
				if tick > 0 && !asleep && running == 0 && waiting > 0 {
					waitingOnly[w.engine] += now.Sub(spanStart(prev, true, stepStart))
				}
			}
			tr.Observe(now, target, mustPageText(b.String()), nil)
			if tick == 0 {
				stepStart = now
			}
			prev = now
			check()
			if rng.IntN(20) == 0 {
				r := tr.EndStep(int64(tick), now)
				clear(waitingOnly)
				stepStart = now
				for _, w := range r.PerWorker {
					m := w.Metrics
					if v, ok := m["vllm/asleep_s"]; ok && !near(v, m["vllm/time/asleep_s"]) {
						t.Errorf("seed %d: asleep_s %v, time/asleep_s %v", seed, v, m["vllm/time/asleep_s"])
					}
					if !near(m["vllm/busy_s"]+m["vllm/idle_s"], m["vllm/time/generating_s"]+m["vllm/time/idle_s"]) {
						t.Errorf("seed %d: busy_s + idle_s %v, generating + idle %v", seed, m["vllm/busy_s"]+m["vllm/idle_s"], m["vllm/time/generating_s"]+m["vllm/time/idle_s"])
					}
				}
			}
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestPauseIsNoSleep: vLLM's legacy awake flag follows the fully-awake predicate, so it is 0
// during a scheduler pause with the weights resident (a weight sync). Such a sample is paused
// in the ledger, and no asleep time in the older keys, which read the resource states first.
func TestPauseIsNoSleep(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true, Scalars: true})
	legacy := func(a int) []string {
		return []string{fmt.Sprintf("engine_sleep_state{sleep_state=\"awake\"} %d", a), "engine_sleep_state{sleep_state=\"weights_offloaded\"} 0"}
	}
	observeText(t, tr, 0, vpage(0, 0, states(resources("running", "resident", "resident"), legacy(1))...))
	observeText(t, tr, 1, vpage(0, 0, states(resources("paused", "resident", "resident"), legacy(0), []string{"engine_fully_awake 0"})...))
	observeText(t, tr, 2, vpage(0, 0, states(resources("running", "resident", "resident"), legacy(1), []string{"engine_fully_awake 1"})...))
	r := tr.EndStep(1, at(2))
	wantLedger(t, r.Metrics, "vllm", map[State]float64{Paused: 1, Idle: 1})
	want(t, r.PerWorker[0].Metrics, "vllm/asleep_s", 0)
	want(t, r.Metrics, "vllm/worker_asleep_fraction/max", 0)
}
