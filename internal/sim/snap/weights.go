package snap

import (
	"time"
)

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
	WeightsResident weightsState = iota
	WeightsOffloaded
	WeightsDiscarded
)

// kvState is the state of an engine's KV cache.
type kvState uint8

const (
	KvResident kvState = iota
	KvReleased
)

// resources is an engine's scheduler and memory state; the zero value is fully awake.
type Resources struct {
	Paused   bool // the scheduler is paused
	Weights  weightsState
	Kv       kvState
	Sleeping bool // from a sleep until the wake-up of the KV cache ends it
}

func (r Resources) FullyAwake() bool {
	return !r.Paused && r.Weights == WeightsResident && r.Kv == KvResident
}

// rlStats is what vLLM's dev-mode RL families show of an engine's weight loads. A family's
// child for the engine exists from the engine's first load start (active) or first load end (the
// others), which dates the counter's _created sample.
type RlStats struct {
	Started, Finished     bool
	StartedAt, FinishedAt time.Duration
	Active                bool
	LoadStart             time.Duration
	Updates               int64 // rl_weight_update_total, and rl_weight_gen
	Duration              Histogram
}

// rlDurationBounds are rl_weight_update_duration_seconds' buckets.
var RlDurationBounds = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
