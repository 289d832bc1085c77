package step

import (
	"math"
	"sort"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
	"github.com/vllmstat/vllmstat/internal/window"
)

// The time ledger assigns every span of an engine's time in a step (and in each phase) to one
// state. As for busy and idle (see balance.go), a successful scrape's sample stands for the
// span since the previous scrape of its target, clipped to the step start (the phase's start
// for a phase); a failed scrape's span is unreachable for every worker of the target's last
// page. A span is in the state of its sample, by this precedence, highest first:
//
//	unreachable      the scrape failed
//	loading_weights  vLLM's rl_weight_update_active > 0; or SGLang's weight load (below)
//	asleep           vLLM's engine_sleep_state says asleep, or the resource states say the
//	                 weights are offloaded or discarded
//	waking           after an asleep sample, while the page shows engine_fully_awake 0 or a
//	                 resource state other than running and resident, until it shows all back
//	paused           engine_pause_state > 0, the scheduler paused with the weights resident,
//	                 or SGLang's num_paused_reqs > 0
//	generating       num_requests_running > 0
//	idle             any other sample
//
// On SGLang's pages the generating and idle of this precedence are refined (a span of another
// state keeps it). SGLang's scheduler sets its gauges at its log points only: at each prefill
// batch, every decode_log_interval decode batches, and every 30 s while idle, so a page shows
// num_running_reqs > 0 for up to 30 s after the engine went idle. Where the engine counts its
// own time, its counts split the span:
//
//	split            the page has scheduler_stage_seconds_total (the scheduler loop's wall
//	                 time by stage) or scheduler_idle_seconds_total, and they moved since the
//	                 worker's previous page: its time since the page at which they last moved
//	                 (or since its previous page) is split by them, within the step (and the
//	                 phase): its generating, idle and undetermined spans become idle for the
//	                 idle seconds' share of that time, then generating for the rest (the
//	                 increase of scheduler_idle_seconds_total, else of the stage seconds'
//	                 "idle" category, over the stage seconds' increase over all categories,
//	                 else over that time), at most all of them; other states keep their
//	                 place, and a weight load the page shows is booked first. So the split is
//	                 exact to the counters' resolution: SGLang adds to them at most once a
//	                 second, at a busy or idle transition. A span in which they did not move
//	                 is booked as on a page without them until they do; in a step that ended
//	                 before, it keeps that state.
//	undetermined     a generating sample of a page without them (or where they did not move)
//	                 whose log-point figures were not refreshed since the worker's previous
//	                 page: every gauge has the value it had, and none of the counters that move
//	                 with a batch (realtime_tokens_total, counted at every prefill and decode
//	                 batch; prefill_effective_tokens_total, estimated_*_total and
//	                 forward_execution_seconds_total, per batch) or at a request's finish
//	                 (num_requests_total, prompt_tokens_total, generation_tokens_total) moved.
//	                 The page repeats an old log point, so it cannot tell whether the engine
//	                 generated or idled: the span is in a state of its own. A worker's first
//	                 page, with nothing to compare, keeps generating.
//
// So an SGLang engine that went idle shows at most the span of one scrape after its last batch
// as generating; the rest, until its next log point, is undetermined. vLLM sets its gauges at
// every iteration, and its ledger has neither refinement: the keys of undetermined are only
// those of a pool with SGLang's or TensorRT-LLM's workers.
//
// TensorRT-LLM's pages get the undetermined refinement too (they have no stage seconds):
// trtllm-serve sets its gauges from the engine's iteration statistics, which it drains from a
// request's finish until the engine made no iteration for half a second (tensorrt_llm/serve/
// openai_server.py, _extract_metrics waking _iteration_stats_collector_loop, whose
// get_stats_async has a timeout of 0.5 s), and the last iteration drained counted the finishing
// request as active. So once its last request finished, an engine's page shows running
// requests until another one finishes, however long it idles or sleeps; its prompt and
// generation tokens, counted at each finish, are the counters that say a page is fresh. A
// span in which nothing was drained while the page shows running requests is undetermined.
//
// A page without a family has no time in the states that family tells: nothing is guessed.
// SGLang's weight_load_duration_seconds tells a load's length once it is over: when a page
// shows a new one (a source's series appears on a worker seen before, or its value changes),
// the span of that many seconds before the scrape (clipped to the step, or the phase) is
// re-attributed to loading_weights, taken from the states it had, but unreachable time. Two
// successive loads of one source that last exactly as long (to the float) read as one, and
// loads of several sources that show on one page are put end to end before the scrape.
//
// Time is kept in integer nanoseconds by state, so the states add up to engine_s exactly; the
// keys are time.Duration(ns).Seconds() of those sums, and a fraction is a state's ns over
// engine_s's ns. Time no sample stands for (before a target's first scrape, between a page that
// did not show a worker and its next sample, after the last sample) is in no state, and no
// engine's time: engine_s is the time the scrapes of engines covered.

// State is one state of the time ledger.
type State uint8

// The states, in the order of their keys' documentation.
const (
	Generating State = iota
	Idle
	Asleep
	Waking
	Paused
	LoadingWeights
	Unreachable
	// Undetermined is SGLang's time that its page could not tell generating from idle (see
	// the ledger's comment).
	Undetermined
	NumStates

	gap = NumStates // time no sample stands for, in a span list
)

var stateNames = [NumStates]string{"generating", "idle", "asleep", "waking", "paused", "loading_weights", "unreachable", "undetermined"}

func (s State) String() string { return stateNames[s] }

// Names of the ledger's keys (without prefix): the engine-seconds of each state and their sum,
// each state's share of it, and the tokens per second of generating.
var (
	stateKeys, fractionKeys = func() (s, f [NumStates]string) {
		for i, n := range stateNames {
			s[i], f[i] = "time/"+n+"_s", "time/"+n+"_fraction"
		}
		return s, f
	}()
	NameGenerationPerGenerating = vllm.Counters[vllm.GenerationTokens].Name + "_per_generating_s"
	NamePromptPerGenerating     = vllm.Counters[vllm.PromptTokens].Name + "_per_generating_s"
	perGeneratingOf             = [...]vllm.Counter{vllm.GenerationTokens, vllm.PromptTokens}
	perGeneratingNames          = [...]string{NameGenerationPerGenerating, NamePromptPerGenerating}
	keepsSpans                  = func() (k [vllm.NumEngines]bool) {
		for e := range vllm.NumEngines {
			k[e] = len(vllm.Gauges[vllm.WeightLoad].Spellings(e)) > 0
		}
		return k
	}()
)

// NameEngineTime is the key name (without prefix) of the engines' time: the sum of the states'.
const NameEngineTime = "time/engine_s"

// StateKey is the key name (without prefix) of state s's engine-seconds: "time/idle_s".
func StateKey(s State) string { return stateKeys[s] }

// FractionKey is the key name (without prefix) of state s's share of engine_s.
func FractionKey(s State) string { return fractionKeys[s] }

// isEngine reports whether ep shows the worker is an engine: it has the running requests or a
// state family (see vllm.LedgerGauges).
func isEngine(ep *page.EnginePage) bool {
	for g, has := range ep.HasGauge {
		if has && vllm.LedgerGauges[g] {
			return true
		}
	}
	return false
}

// classify returns the state of an engine's sample ep, and whether the engine is then asleep
// or waking from sleep; slept is that of its previous sample.
func classify(ep *page.EnginePage, slept bool) (State, bool) {
	rs := ep.SplitGauges[vllm.ResourceState]
	asleep := vllm.EngineAsleep(ep.SplitGauges[vllm.SleepState], rs)
	notBack := ep.HasGauge[vllm.FullyAwake] && ep.Gauges[vllm.FullyAwake] == 0 || vllm.NotAllBack(rs)
	waking := !asleep && slept && notBack
	slept = asleep || waking
	// An absent gauge is 0 on the page.
	switch {
	case ep.Gauges[vllm.WeightUpdateActive] > 0:
		return LoadingWeights, slept
	case asleep:
		return Asleep, slept
	case waking:
		return Waking, slept
	case ep.Gauges[vllm.PauseState] > 0 || vllm.SchedulerPaused(rs) || ep.Gauges[vllm.PausedReqs] > 0:
		return Paused, slept
	case ep.Gauges[vllm.Running] > 0:
		return Generating, slept
	}
	return Idle, slept
}

// refreshedAtEvents are the engine kinds whose gauges are set at events (SGLang's log points,
// TensorRT-LLM's drains of iteration statistics, begun at a request's finish) rather than at every
// iteration: their generating spans get the refinements of sglangTime.
var refreshedAtEvents = [vllm.NumEngines]bool{vllm.SGLang: true, vllm.TRTLLM: true}

// batchCounters are SGLang's counters that move with a batch or a request's finish: one of them
// moving since the previous page says the scheduler ran batches in the span.
var batchCounters = [...]vllm.Counter{vllm.RealtimeTokens, vllm.PrefillEffectiveTokens, vllm.EstFlops, vllm.ForwardSeconds,
	vllm.NumRequests, vllm.PromptTokens, vllm.GenerationTokens}

// sgBooking is how a span of an SGLang engine is booked (see sglangTime): in state s, or, with
// split, the engine's time since from (its counters' previous move) re-split by its own clock,
// idle the share that was idle.
type sgBooking struct {
	s     State
	split bool
	idle  float64
	from  time.Time
}

// sglangSeen is what an SGLang worker's pages told the ledger: the gauges of its last page, to
// tell whether the next page's log-point figures were refreshed, and the scrape at which its
// scheduler's stage or idle seconds last moved.
type sglangSeen struct {
	gauges [vllm.NumGauges]float64
	moved  time.Time
}

// sglangTime refines the state s of an SGLang engine's sample ep at ts (see the ledger's
// comment); inc is the page's increases since the worker's previous page. It remembers the
// page's gauges, and when its scheduler counters moved, the scrape, for the next.
func (ws *workerState) sglangTime(ep *page.EnginePage, inc *window.Increase, s State, ts time.Time) sgBooking {
	had := ws.seen && ws.sg != nil
	if ws.sg == nil {
		ws.sg = &sglangSeen{}
	}
	sg := ws.sg
	prev := sg.gauges
	sg.gauges = ep.Gauges
	if s != Generating && s != Idle {
		return sgBooking{s: s}
	}
	hasStage, hasIdle := inc.HasCounter[vllm.SchedulerStageSeconds], inc.HasCounter[vllm.SchedulerIdleSeconds]
	stage, idle := inc.Counters[vllm.SchedulerStageSeconds], inc.Counters[vllm.SchedulerIdleSeconds]
	if !hasIdle {
		for _, sh := range inc.Shares[vllm.SchedulerStageSeconds] {
			if sh.Value == "idle" {
				idle += sh.Inc
			}
		}
	}
	if (hasStage || hasIdle) && (stage > 0 || idle > 0) {
		// The counts since their previous move: the time since that scrape (or this span).
		from := time.Time{}
		switch {
		case ws.seen && !sg.moved.IsZero():
			from = sg.moved
		case ws.seen:
			from = ws.seenAt
		}
		loop := stage
		if !hasStage && !from.IsZero() {
			loop = ts.Sub(from).Seconds()
		}
		sg.moved = ts
		if f := idle / loop; loop > 0 && finite(f) {
			return sgBooking{s: Generating, split: true, idle: min(max(f, 0), 1), from: from}
		}
	}
	if s != Generating || !had || prev != ep.Gauges {
		return sgBooking{s: s}
	}
	for _, c := range batchCounters {
		if inc.Counters[c] > 0 {
			return sgBooking{s: s}
		}
	}
	return sgBooking{s: Undetermined}
}

// maxLoad bounds a load's length (about 13 days), and the loads of a page's sources put end
// to end, so that their nanoseconds stay far within an int64 however many sources a page has:
// a load that long covers any step before its scrape already.
const maxLoad = int64(1) << 50

// newLoads returns the nanoseconds of the weight loads ep shows that the worker's previous
// pages did not (see the ledger's comment), and remembers the page's durations; seen is whether
// a page showed the worker before. A duration's seconds are rounded down to the nanosecond.
func (ws *workerState) newLoads(ep *page.EnginePage, seen bool) int64 {
	vs := ep.SplitGauges[vllm.WeightLoad]
	if len(vs) == 0 {
		return 0
	}
	if ws.loads == nil {
		ws.loads = make(map[string]float64, len(vs))
	}
	var d int64
	for src, v := range vs {
		if old, had := ws.loads[src]; seen && (!had || old != v) && v > 0 {
			d = min(d+int64(min(v*1e9, float64(maxLoad))), maxLoad) // each at most maxLoad: no overflow
		}
		ws.loads[src] = v
	}
	return d
}

// ledger is a worker's time in the open step, or in one phase of it, by state.
type ledger struct {
	ns [NumStates]int64
	// spans are the states of the time in order, for the re-attribution of SGLang's weight
	// loads: kept only for the workers of engine kinds whose pages have the family (see
	// keepsSpans), since a load's series first appears at the load's end.
	spans *spanList
}

// add books the span from..ts in state s, then re-attributes the load nanoseconds before ts
// to loading_weights; keep says whether the worker keeps its span list. A zero from stands for
// no time.
func (l *ledger) add(from, ts time.Time, s State, load int64, keep bool) {
	if keep && l.spans == nil {
		l.spans = &spanList{}
	}
	if !from.IsZero() && ts.After(from) {
		a, b := from.UnixNano(), ts.UnixNano()
		l.ns[s] += b - a
		if l.spans != nil {
			l.spans.add(a, b, s)
		}
	}
	if load > 0 && l.spans != nil {
		l.spans.load(ts.UnixNano()-load, &l.ns)
	}
}

// addSplit books the span from..ts undetermined and re-attributes the load nanoseconds before
// ts (see add), then re-splits the worker's generating, idle and undetermined time from since
// (at most from; zero for from) to ts: the share idle of its engine time idle, the rest of them
// generating after it, other states where they were. The load goes first: the engine's counts
// tell its time in a weight load apart from idle, so the split must not take it for either.
// Without a span list, the span alone is split.
func (l *ledger) addSplit(since, from, ts time.Time, idle float64, load int64, keep bool) {
	l.add(from, ts, Undetermined, load, keep)
	if since.IsZero() || since.After(from) && !from.IsZero() {
		since = from
	}
	switch {
	case since.IsZero() || !ts.After(since):
	case l.spans != nil:
		l.spans.split(since.UnixNano(), idle, &l.ns)
	case !from.IsZero() && ts.After(from): // from..ts alone was booked
		d := int64(ts.Sub(from))
		i := int64(math.Round(float64(d) * idle))
		l.ns[Undetermined] -= d
		l.ns[Generating] += d - i
		l.ns[Idle] += i
	}
}

// engine is the worker's engine time in nanoseconds: the sum of its states'.
func (l *ledger) engine() int64 {
	var n int64
	for _, v := range l.ns {
		n += v
	}
	return n
}

// span is a part of a span list, from the previous span's end (or the list's start) to end.
type span struct {
	end int64 // Unix nanoseconds
	s   State
}

// spanList is a worker's time in order, adjacent spans of one state merged.
type spanList struct {
	start int64
	spans []span
}

// add appends the span a..b in state s; a is at or after the list's end.
func (l *spanList) add(a, b int64, s State) {
	n := len(l.spans)
	switch {
	case n == 0:
		l.start = a
	case a > l.spans[n-1].end:
		l.spans = append(l.spans, span{a, gap})
	}
	l.push(span{b, s})
}

// push appends sp, merged into the last span when they have one state.
func (l *spanList) push(sp span) {
	if n := len(l.spans); n > 0 && l.spans[n-1].s == sp.s {
		l.spans[n-1].end = sp.end
		return
	}
	l.spans = append(l.spans, sp)
}

// load re-attributes the list's time from a on to loading_weights, but its unreachable time and
// its gaps, moving the nanoseconds in ns.
func (l *spanList) load(a int64, ns *[NumStates]int64) {
	i := sort.Search(len(l.spans), func(k int) bool { return l.spans[k].end > a })
	if i == len(l.spans) {
		return
	}
	start := l.start
	if i > 0 {
		start = l.spans[i-1].end
	}
	tail := make([]span, 0, len(l.spans)-i+1) // loads are rare: a copy of the tail is cheap
	if start < a {
		tail = append(tail, span{a, l.spans[i].s}) // the part before a keeps its state
		start = a
	}
	for _, sp := range l.spans[i:] {
		if s := sp.s; s != gap && s != Unreachable && s != LoadingWeights {
			ns[s] -= sp.end - start
			ns[LoadingWeights] += sp.end - start
			sp.s = LoadingWeights
		}
		tail = append(tail, sp)
		start = sp.end
	}
	l.spans = l.spans[:i]
	for _, sp := range tail {
		l.push(sp)
	}
}

// split re-assigns the list's generating, idle and undetermined time from a on: the share idle
// of all its engine time from a is idle (at most all of them), the time after it generating,
// moving the nanoseconds in ns; other states and gaps keep their place.
func (l *spanList) split(a int64, idle float64, ns *[NumStates]int64) {
	i := sort.Search(len(l.spans), func(k int) bool { return l.spans[k].end > a })
	if i == len(l.spans) {
		return
	}
	start := l.start
	if i > 0 {
		start = l.spans[i-1].end
	}
	tail := make([]span, 0, len(l.spans)-i+1)
	if start < a {
		tail = append(tail, span{a, l.spans[i].s}) // the part before a keeps its state
		start = a
	}
	splittable := func(s State) bool { return s == Generating || s == Idle || s == Undetermined }
	var total, window int64 // the splittable time from a, and all engine time from a
	t := start
	for _, sp := range l.spans[i:] {
		d := sp.end - max(t, a)
		if splittable(sp.s) {
			total += d
		}
		if sp.s != gap {
			window += d
		}
		t = sp.end
	}
	// The idle share is of the engine's whole time: its paused or loading time is not idle.
	// Idle goes first: a weight load, which shows at its end and is re-attributed from the
	// scrape back (see load), follows the engine's idle time before it, not its generating.
	idleNS := min(total, int64(math.Round(float64(window)*idle)))
	t = start
	for k, sp := range l.spans[i:] {
		from := t
		if k == 0 {
			from = max(t, a)
		}
		t = sp.end
		if !splittable(sp.s) {
			tail = append(tail, sp)
			continue
		}
		d := sp.end - from
		ns[sp.s] -= d
		i := min(d, idleNS)
		idleNS -= i
		ns[Idle] += i
		ns[Generating] += d - i
		if i > 0 {
			tail = append(tail, span{from + i, Idle})
		}
		if d > i {
			tail = append(tail, span{sp.end, Generating})
		}
	}
	l.spans = l.spans[:i]
	for _, sp := range tail {
		l.push(sp)
	}
}

// ledgerValues are the ledger's keys over a pool of workers (all of a kind, or one): none when
// they have no engine time, and those of undetermined only when SGLang's or TensorRT-LLM's
// workers are among them.
func ledgerValues(was []*workerAcc) []vllm.Value {
	var ns [NumStates]int64
	var tokens [len(perGeneratingOf)]float64
	var has [len(perGeneratingOf)]bool
	stale := false // undetermined is a state of SGLang's and TensorRT-LLM's pages only: other pools have no keys of it
	for _, wa := range was {
		stale = stale || refreshedAtEvents[wa.kind]
		for s, v := range wa.led.ns {
			ns[s] += v
		}
		for i, c := range perGeneratingOf {
			if wa.has[c] {
				has[i] = true
				tokens[i] += wa.totals[c]
			}
		}
	}
	var engine int64
	for _, v := range ns {
		engine += v
	}
	if engine <= 0 {
		return nil
	}
	vs := make([]vllm.Value, 0, 2*int(NumStates)+1+len(tokens))
	for s, v := range ns {
		if State(s) == Undetermined && !stale {
			continue
		}
		vs = append(vs, vllm.Value{Name: stateKeys[s], V: time.Duration(v).Seconds()},
			vllm.Value{Name: fractionKeys[s], V: float64(v) / float64(engine)})
	}
	vs = append(vs, vllm.Value{Name: NameEngineTime, V: time.Duration(engine).Seconds()})
	if g := ns[Generating]; g > 0 {
		for i, name := range perGeneratingNames {
			if v := tokens[i] / time.Duration(g).Seconds(); has[i] && finite(v) {
				vs = append(vs, vllm.Value{Name: name, V: v})
			}
		}
	}
	return vs
}
