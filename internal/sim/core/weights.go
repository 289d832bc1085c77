package core

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// sleepLevel is the level the colocated loop puts engines to sleep at, LLM.sleep()'s default:
// weights offloaded to CPU memory, KV cache released.
const SleepLevel = 1

// Asleep reports whether the engine is in a sleep, from the sleep to the end of its wake-up.
func (e *Engine) Asleep() bool { return e.Stats.Res.Sleeping }

// snap marks the engine's first sleep-state snapshot.
func (e *Engine) snap(at time.Duration) {
	if !e.Stats.Snapshot {
		e.Stats.Snapshot, e.Stats.SnapshotAt = true, at
	}
}

// sleep puts the idle engine to sleep at the given level at time at, as vLLM's sleep mode
// does: the KV cache is released, and the prefix cache with it, so nothing runs, nothing waits
// and no block is used. The colocated loop puts engines to sleep only once every engine is idle,
// with no request submitted.
func (e *Engine) Sleep(level int, at time.Duration) {
	e.Pool.reset()
	e.Stats.Running, e.Stats.Waiting, e.Stats.KvUsage = 0, 0, 0
	w := snap.WeightsOffloaded
	if level == 2 {
		w = snap.WeightsDiscarded
	}
	e.Stats.Res = snap.Resources{Paused: true, Weights: w, Kv: snap.KvReleased, Sleeping: true}
	e.snap(at)
	e.Note(at)
}

// wakeWeights ends the wake-up of a sleeping engine's weights at at; the KV cache stays
// released and the scheduler paused. An engine not asleep (its server restarted during the
// sleep) has nothing to wake.
func (e *Engine) WakeWeights(at time.Duration) {
	if !e.Stats.Res.Sleeping {
		return
	}
	e.Stats.Res.Weights = snap.WeightsResident
	e.Note(at)
}

// wakeKV ends the wake-up of a sleeping engine's KV cache at at, which resumes its scheduler:
// the engine is fully awake, with an empty cache.
func (e *Engine) WakeKV(at time.Duration) {
	if !e.Stats.Res.Sleeping {
		return
	}
	e.Stats.Res = snap.Resources{}
	e.Note(at)
}

// halted reports whether the engine's scheduler is paused for a weight sync: it runs no
// iteration, and requests that arrive wait until it resumes. A sleeping engine has nothing to
// run anyway.
func (e *Engine) Halted() bool { return e.Stats.Res.Paused && !e.Stats.Res.Sleeping }

// pause pauses the engine's scheduler at at, or at the end of its iteration in flight: the
// requests it holds stay where they are (vLLM's pause mode "keep"; on SGLang they are the paused
// requests) and nothing runs until resume.
func (e *Engine) Pause(at time.Duration) time.Duration {
	at = max(at, e.Time)
	e.Time = at
	e.Stats.Res.Paused = true
	e.snap(at)
	if e.cfg.SGLang {
		// SGLang sets the gauge when the sync takes the requests and again when it gives them
		// back: no log point runs while the engine is paused.
		e.Stats.Sg.Logged.Paused = len(e.Running) + e.Waiting.Len()
	}
	e.Note(at)
	return at
}

// resume resumes a paused engine's scheduler at at; its next iteration starts then.
func (e *Engine) Resume(at time.Duration) {
	e.Time = max(e.Time, at)
	e.Stats.Res.Paused = false
	e.Stats.Sg.Logged.Paused = 0
	e.Note(at)
}

// startLoad starts a weight load at at (start_weight_update).
func (e *Engine) StartLoad(at time.Duration) {
	rl := &e.Stats.Rl
	if !rl.Started {
		rl.Started, rl.StartedAt = true, at
	}
	rl.Active, rl.LoadStart = true, at
	e.Note(at)
}

// finishLoad ends the weight load at at with the given version (finish_weight_update): vLLM
// counts it and records its duration, SGLang sets its duration gauge.
func (e *Engine) finishLoad(at time.Duration, version int) {
	rl := &e.Stats.Rl
	if !rl.Active {
		return
	}
	if !rl.Finished {
		rl.Finished, rl.FinishedAt = true, at
	}
	d := (at - rl.LoadStart).Seconds()
	rl.Active = false
	rl.Updates++
	rl.Duration.Observe(snap.RlDurationBounds, d)
	e.Stats.Sg.WeightLoad, e.Stats.Sg.WeightLoaded = d+e.callOverhead(rl.Updates).Seconds(), true
	e.Stats.Version, e.Stats.HasVersion = version, true
	e.Led.Versions = append(e.Led.Versions, VersionChange{version, at})
	e.Note(at)
	if e.Trace != nil {
		e.Trace(TraceEvent{At: at, Kind: TraceLoaded, N: version})
	}
}

// callOverhead is how much longer than the load itself SGLang's update call of the engine's nth
// load takes (see the top of this file): from 100 µs to 1 ms, drawn from the engine and n.
func (e *Engine) callOverhead(n int64) time.Duration {
	h := Mix64(uint64(e.Server)<<40 ^ uint64(e.Index)<<20 ^ uint64(n) ^ 0x636f7374)
	return 100*time.Microsecond + time.Duration(Unit(h)*float64(900*time.Microsecond))
}

// beginSync starts a weight sync at at: the engine loads new weights with its scheduler paused,
// pausing it first unless a sleep has it paused already. It returns the time the load starts.
func (e *Engine) BeginSync(at time.Duration) time.Duration {
	if !e.Stats.Res.Paused {
		at = e.Pause(at)
		e.Sync.Paused = true
	}
	e.Sync.Loading = true
	e.StartLoad(at)
	return at
}

// endSync ends a weight sync begun by beginSync at at with the given version, and resumes the
// engine if the sync paused it. A sync its server's restart cut short ends with nothing.
func (e *Engine) EndSync(at time.Duration, version int) {
	if !e.Sync.Loading {
		return
	}
	e.finishLoad(at, version)
	e.Sync.Loading = false
	if e.Sync.Paused {
		e.Sync.Paused = false
		e.Resume(at)
	}
}
