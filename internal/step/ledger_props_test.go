package step

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The ledger's property test plays random fleets (vLLM engines with random sets of the sleep,
// pause and weight-update families, an SGLang data-parallel server whose tokenizer is a worker
// of its own, reloading its weights) through failed scrapes, engines missing from pages,
// removed targets, sleeps, wakes, pauses, loads and phases that span step ends, and checks every
// step and phase against a reference that knows only the scrapes and the engines' true modes:
//
//   - in each kind's keys and each worker's, the states add up to engine_s to the nanosecond,
//     none is negative, and the fractions are the states over engine_s;
//   - engine_s is, per worker and over the fleet, the time the engines' scrapes covered: the
//     span since the previous scrape of the target (clipped to the step or phase start) of every
//     successful scrape that showed the engine and of every failed one after a page that did;
//   - unreachable is the failed scrapes' share of that, and for vLLM, whose states no load
//     re-attributes, generating, asleep and loading_weights are the spans of the scrapes taken
//     while the engine ran requests, slept with a family that shows it, or loaded weights with
//     rl_weight_update_active on its page.

type lMode uint8

const (
	mAwake lMode = iota
	mAsleep
	mWaking
	mPaused
	mLoading
)

// lEngine is one engine (or SGLang's tokenizer) of the simulated fleet.
type lEngine struct {
	id                             WorkerID
	kind                           vllm.Engine
	batches                        int // SGLang's batches so far, its realtime_tokens_total
	tokenizer                      bool
	legacy, resource, fully, pause bool // vLLM's families on its page
	rl                             bool
	snap                           bool // the resource families show: after its first sleep or pause
	mode                           lMode
	level                          int // sleep level while asleep
	running                        float64
	tokens                         float64
	up                             bool // on its target's pages
	loads                          map[string]float64
	loadFrom                       time.Time
	loadSrc                        string
	downTicks                      int
	label                          string // vLLM's engine label, SGLang's dp_rank
}

type lTarget struct {
	url     string
	engines []*lEngine
	present bool
	prev    time.Time
	tried   bool
	last    []*lEngine // the engines of its last successful page
}

// lAcct is what the reference expects of a step or a phase.
type lAcct struct {
	known                         map[WorkerID]int64
	unreach, gen, asleep, loading [vllm.NumEngines]int64
	workerUnreach                 map[WorkerID]int64
}

func newAcct() *lAcct {
	return &lAcct{known: map[WorkerID]int64{}, workerUnreach: map[WorkerID]int64{}}
}

func (e *lEngine) render(b *strings.Builder) {
	if e.kind == vllm.SGLang {
		if e.tokenizer {
			fmt.Fprintf(b, "sglang:generation_tokens_total{engine_type=\"unified\",model_name=\"m\"} %v\n", e.tokens)
			return
		}
		lbl := fmt.Sprintf(`dp_rank=%q,engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"`, e.label)
		running, paused := e.running, 0.0
		switch e.mode {
		case mPaused:
			running, paused = 0, 3
		case mLoading:
			running = 0
		}
		fmt.Fprintf(b, "sglang:num_running_reqs{%s} %v\nsglang:num_queue_reqs{%s} 0\nsglang:num_paused_reqs{%s} %v\n", lbl, running, lbl, lbl, paused)
		// A batch between every two pages: the gauges are refreshed, and generating is not
		// undetermined (which TestSGLangUndetermined checks).
		e.batches++
		fmt.Fprintf(b, "sglang:realtime_tokens_total{%s,mode=\"decode\"} %d\n", lbl, e.batches)
		for src, d := range e.loads {
			fmt.Fprintf(b, "sglang:weight_load_duration_seconds{%s,source=%q} %v\n", lbl, src, d)
		}
		return
	}
	lbl := `model_name="m"`
	if e.label != "" {
		lbl = fmt.Sprintf(`engine=%q,model_name="m"`, e.label)
	}
	running := 0.0
	if e.mode == mAwake {
		running = e.running
	}
	fmt.Fprintf(b, "vllm:num_requests_running{%s} %v\nvllm:num_requests_waiting{%s} 0\nvllm:generation_tokens_total{%s} %v\n", lbl, running, lbl, lbl, e.tokens)
	b01 := func(c bool) int {
		if c {
			return 1
		}
		return 0
	}
	asleep := e.mode == mAsleep
	if e.legacy {
		fmt.Fprintf(b, "vllm:engine_sleep_state{%s,sleep_state=\"awake\"} %d\n", lbl, b01(!asleep))
		fmt.Fprintf(b, "vllm:engine_sleep_state{%s,sleep_state=\"weights_offloaded\"} %d\n", lbl, b01(asleep && e.level == 1))
		fmt.Fprintf(b, "vllm:engine_sleep_state{%s,sleep_state=\"discard_all\"} %d\n", lbl, b01(asleep && e.level == 2))
	}
	if e.resource && e.snap {
		sched := "running"
		weights, kv := "resident", "resident"
		switch e.mode {
		case mAsleep:
			sched, weights, kv = "paused", "offloaded", "released"
			if e.level == 2 {
				weights = "discarded"
			}
		case mWaking:
			sched, kv = "paused", "released"
		case mPaused:
			sched = "paused"
		}
		for _, r := range []struct {
			name, cur string
			states    []string
		}{{"scheduler", sched, []string{"running", "paused"}}, {"weights", weights, []string{"resident", "offloaded", "discarded", "unknown"}},
			{"kv_cache", kv, []string{"resident", "released", "unknown"}}} {
			for _, s := range r.states {
				fmt.Fprintf(b, "vllm:engine_sleep_resource_state{%s,resource=%q,state=%q} %d\n", lbl, r.name, s, b01(s == r.cur))
			}
		}
	}
	if e.fully {
		fmt.Fprintf(b, "vllm:engine_fully_awake{%s} %d\n", lbl, b01(e.mode == mAwake || e.mode == mLoading))
	}
	if e.pause {
		fmt.Fprintf(b, "vllm:engine_pause_state{%s} %d\n", lbl, b01(e.mode == mPaused))
	}
	if e.rl {
		el := ""
		if e.label != "" {
			el = fmt.Sprintf("{engine=%q}", e.label)
		}
		fmt.Fprintf(b, "vllm:rl_weight_update_active%s %d\n", el, b01(e.mode == mLoading))
	}
}

// step moves the engine's mode on at now, counting what happened in seen.
func (e *lEngine) step(rng *rand.Rand, now time.Time, seen map[string]int) {
	p := func(n int) bool { return rng.IntN(n) == 0 }
	e.running = float64(max(0, rng.IntN(6)-2))
	e.tokens += float64(rng.IntN(50))
	if e.tokenizer {
		return
	}
	if e.downTicks > 0 {
		if e.downTicks--; e.downTicks == 0 {
			e.up = true
		}
		return
	}
	if e.up && p(60) {
		// down for a while: a restart, which for SGLang clears its weight load gauge
		e.up, e.downTicks, e.mode = false, 1+rng.IntN(4), mAwake
		if e.kind == vllm.SGLang {
			e.loads = nil
		}
		seen["engine down"]++
		return
	}
	if e.kind == vllm.SGLang {
		switch e.mode {
		case mAwake:
			switch {
			case p(12):
				e.mode = mPaused
			case p(10):
				e.mode, e.loadFrom = mLoading, now
				e.loadSrc = []string{"disk", "distributed", "tensor"}[rng.IntN(3)]
			}
		case mPaused:
			if p(3) {
				e.mode = mAwake
			}
		case mLoading:
			if p(3) {
				if e.loads == nil {
					e.loads = map[string]float64{}
				}
				e.loads[e.loadSrc] = now.Sub(e.loadFrom).Seconds()
				e.mode = mAwake
				seen["sglang load"]++
			}
		}
		return
	}
	switch e.mode {
	case mAwake:
		switch {
		case p(10):
			e.mode, e.level, e.snap = mAsleep, 1+rng.IntN(2), true
			seen["sleep"]++
		case p(15):
			e.mode, e.snap = mPaused, true
			seen["pause"]++
		case p(15):
			e.mode = mLoading
			seen["vllm load"]++
		}
	case mAsleep:
		if p(3) {
			e.mode = mWaking
			seen["wake"]++
		}
	case mWaking, mPaused, mLoading:
		if p(2) {
			e.mode = mAwake
		}
	}
}

func TestLedgerMatchesReference(t *testing.T) {
	n := propsRuns(t)
	seen := map[string]int{}
	for run := range n {
		if msg := ledgerRun(uint64(run), seen); msg != "" {
			t.Fatalf("run %d (seed %d): %s", run, run, msg)
		}
	}
	t.Logf("%d runs: %v", n, seen)
	for _, k := range []string{"failed scrape", "forget", "engine down", "sleep", "wake", "pause", "vllm load", "sglang load",
		"phase over a step end", "waking_s > 0", "paused_s > 0", "sglang loading_s > 0", "vllm loading_s > 0", "unreachable in a phase"} {
		if seen[k] == 0 {
			t.Errorf("no %q in %d runs: the test does not exercise it", k, n)
		}
	}
}

// ledgerRun plays one random fleet and returns what went wrong, or "".
func ledgerRun(seed uint64, seen map[string]int) string {
	rng := rand.New(rand.NewPCG(seed, 0x1ed9e5))
	p := func(n int) bool { return rng.IntN(n) == 0 }
	tr := NewTracker(Options{PerWorker: true, NoTimeline: p(2), Scalars: p(2)})
	now := time.Date(2026, 3, 4, 5, 6, 7, 891, time.UTC)
	tr.Begin(now)
	vllmEngine := func(url, label string) *lEngine {
		e := &lEngine{id: WorkerID{Target: url, Engine: label}, kind: vllm.VLLM, label: label, up: true,
			legacy: p(2), resource: p(2), fully: p(2), pause: p(2), rl: p(2)}
		return e
	}
	var targets []*lTarget
	a := &lTarget{url: "http://a:8000/metrics", present: true}
	a.engines = []*lEngine{vllmEngine(a.url, "0"), vllmEngine(a.url, "1")}
	b := &lTarget{url: "http://b:8000/metrics", present: true}
	b.engines = []*lEngine{vllmEngine(b.url, "")}
	s := &lTarget{url: "http://s:30000/metrics", present: true}
	for _, dp := range []string{"0", "1"} {
		s.engines = append(s.engines, &lEngine{id: WorkerID{Target: s.url, Labels: page.LabelKey(map[string]string{"dp_rank": dp})},
			kind: vllm.SGLang, label: dp, up: true})
	}
	tok := &lEngine{id: WorkerID{Target: s.url}, kind: vllm.SGLang, tokenizer: true, up: true}
	s.engines = append(s.engines, tok)
	targets = append(targets, a, b, s)

	stepStart := now
	stepAcct := newAcct()
	phases := map[string]*lAcct{}
	phase, phaseSince := "", time.Time{}
	var stepN int64
	const ticks = 160
	for tick := range ticks {
		for _, tg := range targets {
			switch {
			case tg.present && tick > 0 && p(120):
				tr.Forget(tg.url)
				tg.present, tg.tried, tg.last = false, false, nil
				seen["forget"]++
				continue
			case !tg.present:
				tg.present = p(8)
				if !tg.present {
					continue
				}
			}
			now = now.Add(time.Duration(1e6 + rng.Int64N(4e8)))
			for _, e := range tg.engines {
				e.step(rng, now, seen)
			}
			// the span the scrape stands for, in the step and in the open phase
			var from, pfrom int64 = -1, -1
			if tg.tried {
				from = max(tg.prev.UnixNano(), stepStart.UnixNano())
				if phase != "" {
					pfrom = max(tg.prev.UnixNano(), phaseSince.UnixNano())
				}
			}
			book := func(acct *lAcct, from int64, e *lEngine, fail bool) {
				if from < 0 || from >= now.UnixNano() {
					return
				}
				d := now.UnixNano() - from
				acct.known[e.id] += d
				switch {
				case fail:
					acct.unreach[e.kind] += d
					acct.workerUnreach[e.id] += d
				case e.kind != vllm.VLLM:
				case e.mode == mAwake && e.running > 0:
					acct.gen[e.kind] += d
				case e.mode == mAsleep && (e.legacy || e.resource):
					acct.asleep[e.kind] += d
				case e.mode == mLoading && e.rl:
					acct.loading[e.kind] += d
				}
			}
			if tick > 0 && p(8) {
				tr.Observe(now, tg.url, nil, errTest)
				seen["failed scrape"]++
				for _, e := range tg.last {
					book(stepAcct, from, e, true)
					if phase != "" {
						book(phases[phase], pfrom, e, true)
						if pfrom >= 0 {
							seen["unreachable in a phase"]++
						}
					}
				}
				tg.prev, tg.tried = now, true
				continue
			}
			var sb strings.Builder
			tg.last = tg.last[:0]
			for _, e := range tg.engines {
				if !e.up {
					continue
				}
				e.render(&sb)
				if !e.tokenizer {
					tg.last = append(tg.last, e)
					book(stepAcct, from, e, false)
					if phase != "" {
						book(phases[phase], pfrom, e, false)
					}
				}
			}
			pg, err := page.ParsePage([]byte(sb.String()))
			if err != nil {
				return fmt.Sprintf("generated page does not parse: %v\n%s", err, sb.String())
			}
			tr.Observe(now, tg.url, pg, nil)
			tg.prev, tg.tried = now, true
		}
		switch {
		case phase == "" && p(6):
			phase, phaseSince = []string{"rollout", "eval"}[rng.IntN(2)], now
			tr.StartPhase(phase, now)
			if phases[phase] == nil {
				phases[phase] = newAcct()
			}
		case phase != "" && p(8):
			tr.EndPhase(phase, now)
			phase = ""
		}
		if p(12) || tick == ticks-1 {
			stepN++
			r := tr.EndStep(stepN, now)
			if msg := checkLedger(r.Metrics, r.PerWorker, stepAcct, seen); msg != "" {
				return fmt.Sprintf("step %d: %s", stepN, msg)
			}
			for name, acct := range phases {
				ph := r.Phases[name]
				if ph == nil {
					return fmt.Sprintf("step %d: no phase %s", stepN, name)
				}
				if msg := checkLedger(ph.Metrics, nil, acct, seen); msg != "" {
					return fmt.Sprintf("step %d phase %s: %s", stepN, name, msg)
				}
			}
			if tok := workerRecord(r.PerWorker, tok.id); tok != nil {
				for k := range tok.Metrics {
					if strings.Contains(k, "/time/") {
						return fmt.Sprintf("step %d: the tokenizer has %s", stepN, k)
					}
				}
			}
			stepStart, stepAcct, phases = now, newAcct(), map[string]*lAcct{}
			if phase != "" {
				phases[phase], phaseSince = newAcct(), now
				seen["phase over a step end"]++
			}
		}
	}
	return ""
}

func workerRecord(ws []WorkerRecord, id WorkerID) *WorkerRecord {
	for i := range ws {
		if recordID(&ws[i]) == id {
			return &ws[i]
		}
	}
	return nil
}

func recordID(w *WorkerRecord) WorkerID {
	return WorkerID{Target: w.Target, Engine: w.Engine, Labels: page.LabelKey(w.Labels)}
}

// lKind is the engine kind of a worker of the simulated fleet.
func lKind(id WorkerID) vllm.Engine {
	if strings.HasPrefix(id.Target, "http://s:") {
		return vllm.SGLang
	}
	return vllm.VLLM
}

// nsOf is the nanoseconds of a key's seconds, which are time.Duration(ns).Seconds().
func nsOf(v float64) int64 { return int64(math.Round(v * 1e9)) }

// checkLedger compares the ledger's keys of a step or phase (m) and of its workers (per, nil
// for a phase) with the reference.
func checkLedger(m map[string]float64, per []WorkerRecord, exp *lAcct, seen map[string]int) string {
	var known [vllm.NumEngines]int64
	for id, d := range exp.known {
		known[lKind(id)] += d
	}
	// states returns the states' ns under prefix, and checks them against engine_s.
	states := func(m map[string]float64, prefix string, want int64) ([NumStates]int64, string) {
		var ns [NumStates]int64
		eng, ok := m[prefix+"/"+NameEngineTime]
		if want == 0 {
			for k := range m {
				if strings.HasPrefix(k, prefix+"/time/") {
					return ns, fmt.Sprintf("%s = %v, reference: no engine time", k, m[k])
				}
			}
			return ns, ""
		}
		if !ok || nsOf(eng) != want {
			return ns, fmt.Sprintf("%s/%s = %v (present %v), reference %d ns", prefix, NameEngineTime, eng, ok, want)
		}
		var sum int64
		var fsum float64
		for s := range NumStates {
			v, ok := m[prefix+"/"+StateKey(s)]
			f, fok := m[prefix+"/"+FractionKey(s)]
			if s == Undetermined && !strings.HasPrefix(prefix, "sglang") {
				if ok || fok {
					return ns, fmt.Sprintf("%s/%s present on no SGLang page", prefix, StateKey(s))
				}
				continue
			}
			if !ok || !fok {
				return ns, fmt.Sprintf("%s/%s or its fraction absent", prefix, StateKey(s))
			}
			ns[s] = nsOf(v)
			if ns[s] < 0 || f != float64(ns[s])/float64(want) {
				return ns, fmt.Sprintf("%s/%s = %v, fraction %v, engine %d ns", prefix, StateKey(s), v, f, want)
			}
			sum += ns[s]
			fsum += f
		}
		if sum != want || math.Abs(fsum-1) > 1e-12 {
			return ns, fmt.Sprintf("%s: the states add up to %d ns, engine_s %d ns (fractions %v)", prefix, sum, want, fsum)
		}
		return ns, ""
	}
	for k := range vllm.NumEngines {
		prefix := vllm.Engines[k].Prefix
		ns, msg := states(m, prefix, known[k])
		if msg != "" {
			return msg
		}
		if known[k] == 0 {
			continue
		}
		if ns[Unreachable] != exp.unreach[k] {
			return fmt.Sprintf("%s unreachable %d ns, reference %d", prefix, ns[Unreachable], exp.unreach[k])
		}
		if k == vllm.VLLM {
			for _, c := range []struct {
				s    State
				want int64
			}{{Generating, exp.gen[k]}, {Asleep, exp.asleep[k]}, {LoadingWeights, exp.loading[k]}} {
				if ns[c.s] != c.want {
					return fmt.Sprintf("vllm %s %d ns, reference %d", c.s, ns[c.s], c.want)
				}
			}
		}
		if ns[Waking] > 0 {
			seen["waking_s > 0"]++
		}
		if ns[Paused] > 0 {
			seen["paused_s > 0"]++
		}
		if ns[LoadingWeights] > 0 {
			seen[prefix+" loading_s > 0"]++
		}
	}
	for _, w := range per {
		id := recordID(&w)
		prefix := vllm.Engines[lKind(id)].Prefix
		ns, msg := states(w.Metrics, prefix, exp.known[id])
		if msg != "" {
			return fmt.Sprintf("worker %v: %s", id, msg)
		}
		if ns[Unreachable] != exp.workerUnreach[id] {
			return fmt.Sprintf("worker %v: unreachable %d ns, reference %d", id, ns[Unreachable], exp.workerUnreach[id])
		}
	}
	return ""
}
