package sim

import "time"

// An engine's sleep, its pauses and its weight loads, as vLLM's and SGLang's pages and version
// endpoints show them.
//
// vLLM (docs/design/engine_sleep_state.md) keeps three resources per engine: the scheduler
// (running or paused), the weights (resident, offloaded, discarded) and the KV cache (resident
// or released). sleep(level=1) pauses the scheduler, offloads the weights and releases the KV
// cache; a wake-up of the weights makes them resident, and the wake-up of the KV cache after it
// resumes the scheduler: the engine is fully awake again. The legacy engine_sleep_state follows
// the same state: awake is the fully-awake predicate (so it is 0 during a pause and a partial
// wake-up too), weights_offloaded is 1 while the weights are offloaded, discard_all while they
// are discarded and the KV cache released. A weight load is the dev-mode RL protocol's
// start_weight_update .. finish_weight_update, which sets the engine's weight version.
//
// SGLang shows a load's duration at its end (weight_load_duration_seconds) and the requests an
// asynchronous weight sync holds (num_paused_reqs); it has no sleep families. It times the whole
// update_weights_from_* call, a little longer than the load (callOverhead), so that no two loads
// show the same duration: the simulation's loads all last LoadTime, and a gauge set to the value
// it has already shows nothing of the second load.

// weightsState is the state of an engine's weights.
type weightsState uint8

const (
	weightsResident weightsState = iota
	weightsOffloaded
	weightsDiscarded
)

// kvState is the state of an engine's KV cache.
type kvState uint8

const (
	kvResident kvState = iota
	kvReleased
)

// resources is an engine's scheduler and memory state; the zero value is fully awake.
type resources struct {
	paused   bool // the scheduler is paused
	weights  weightsState
	kv       kvState
	sleeping bool // from a sleep until the wake-up of the KV cache ends it
}

func (r resources) fullyAwake() bool {
	return !r.paused && r.weights == weightsResident && r.kv == kvResident
}

// rlStats is what vLLM's dev-mode RL families show of an engine's weight loads. A family's
// child for the engine exists from the engine's first load start (active) or first load end (the
// others), which dates the counter's _created sample.
type rlStats struct {
	started, finished     bool
	startedAt, finishedAt time.Duration
	active                bool
	loadStart             time.Duration
	updates               int64 // rl_weight_update_total, and rl_weight_gen
	duration              histogram
}

// rlDurationBounds are rl_weight_update_duration_seconds' buckets.
var rlDurationBounds = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// sleepLevel is the level the colocated loop puts engines to sleep at, LLM.sleep()'s default:
// weights offloaded to CPU memory, KV cache released.
const sleepLevel = 1

// Asleep reports whether the engine is in a sleep, from the sleep to the end of its wake-up.
func (e *Engine) Asleep() bool { return e.stats.res.sleeping }

// snap marks the engine's first sleep-state snapshot.
func (e *Engine) snap(at time.Duration) {
	if !e.stats.snapshot {
		e.stats.snapshot, e.stats.snapshotAt = true, at
	}
}

// sleep puts the idle engine to sleep at the given level at time at, as vLLM's sleep mode
// does: the KV cache is released, and the prefix cache with it, so nothing runs, nothing waits
// and no block is used. The colocated loop puts engines to sleep only once every engine is idle,
// with no request submitted.
func (e *Engine) sleep(level int, at time.Duration) {
	e.pool.reset()
	e.stats.running, e.stats.waiting, e.stats.kvUsage = 0, 0, 0
	w := weightsOffloaded
	if level == 2 {
		w = weightsDiscarded
	}
	e.stats.res = resources{paused: true, weights: w, kv: kvReleased, sleeping: true}
	e.snap(at)
	e.note(at)
}

// wakeWeights ends the wake-up of a sleeping engine's weights at at; the KV cache stays
// released and the scheduler paused. An engine not asleep (its server restarted during the
// sleep) has nothing to wake.
func (e *Engine) wakeWeights(at time.Duration) {
	if !e.stats.res.sleeping {
		return
	}
	e.stats.res.weights = weightsResident
	e.note(at)
}

// wakeKV ends the wake-up of a sleeping engine's KV cache at at, which resumes its scheduler:
// the engine is fully awake, with an empty cache.
func (e *Engine) wakeKV(at time.Duration) {
	if !e.stats.res.sleeping {
		return
	}
	e.stats.res = resources{}
	e.note(at)
}

// halted reports whether the engine's scheduler is paused for a weight sync: it runs no
// iteration, and requests that arrive wait until it resumes. A sleeping engine has nothing to
// run anyway.
func (e *Engine) halted() bool { return e.stats.res.paused && !e.stats.res.sleeping }

// pause pauses the engine's scheduler at at, or at the end of its iteration in flight: the
// requests it holds stay where they are (vLLM's pause mode "keep"; on SGLang they are the paused
// requests) and nothing runs until resume.
func (e *Engine) pause(at time.Duration) time.Duration {
	at = max(at, e.now)
	e.now = at
	e.stats.res.paused = true
	e.snap(at)
	if e.cfg.SGLang {
		// SGLang sets the gauge when the sync takes the requests and again when it gives them
		// back: no log point runs while the engine is paused.
		e.stats.sg.logged.paused = len(e.running) + e.waiting.len()
	}
	e.note(at)
	return at
}

// resume resumes a paused engine's scheduler at at; its next iteration starts then.
func (e *Engine) resume(at time.Duration) {
	e.now = max(e.now, at)
	e.stats.res.paused = false
	e.stats.sg.logged.paused = 0
	e.note(at)
}

// startLoad starts a weight load at at (start_weight_update).
func (e *Engine) startLoad(at time.Duration) {
	rl := &e.stats.rl
	if !rl.started {
		rl.started, rl.startedAt = true, at
	}
	rl.active, rl.loadStart = true, at
	e.note(at)
}

// finishLoad ends the weight load at at with the given version (finish_weight_update): vLLM
// counts it and records its duration, SGLang sets its duration gauge.
func (e *Engine) finishLoad(at time.Duration, version int) {
	rl := &e.stats.rl
	if !rl.active {
		return
	}
	if !rl.finished {
		rl.finished, rl.finishedAt = true, at
	}
	d := (at - rl.loadStart).Seconds()
	rl.active = false
	rl.updates++
	rl.duration.observe(rlDurationBounds, d)
	e.stats.sg.weightLoad, e.stats.sg.weightLoaded = d+e.callOverhead(rl.updates).Seconds(), true
	e.stats.version, e.stats.hasVersion = version, true
	e.led.versions = append(e.led.versions, VersionChange{version, at})
	e.note(at)
	if e.trace != nil {
		e.trace(traceEvent{at: at, kind: traceLoaded, n: version})
	}
}

// callOverhead is how much longer than the load itself SGLang's update call of the engine's nth
// load takes (see the top of this file): from 100 µs to 1 ms, drawn from the engine and n.
func (e *Engine) callOverhead(n int64) time.Duration {
	h := mix64(uint64(e.server)<<40 ^ uint64(e.index)<<20 ^ uint64(n) ^ 0x636f7374)
	return 100*time.Microsecond + time.Duration(unit(h)*float64(900*time.Microsecond))
}

// beginSync starts a weight sync at at: the engine loads new weights with its scheduler paused,
// pausing it first unless a sleep has it paused already. It returns the time the load starts.
func (e *Engine) beginSync(at time.Duration) time.Duration {
	if !e.stats.res.paused {
		at = e.pause(at)
		e.sync.paused = true
	}
	e.sync.loading = true
	e.startLoad(at)
	return at
}

// endSync ends a weight sync begun by beginSync at at with the given version, and resumes the
// engine if the sync paused it. A sync its server's restart cut short ends with nothing.
func (e *Engine) endSync(at time.Duration, version int) {
	if !e.sync.loading {
		return
	}
	e.finishLoad(at, version)
	e.sync.loading = false
	if e.sync.paused {
		e.sync.paused = false
		e.resume(at)
	}
}
