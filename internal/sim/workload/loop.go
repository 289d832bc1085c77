package workload

import (
	"time"
)

// The colocated loop (WorkloadConfig.Colocated) runs one training step after another, each on
// this timeline of simulated time, every edge a LoopEdge:
//
//	RolloutStart  the trainer starts the step's rollout (StartDelay, then Pause after the last
//	              Wake); its batch arrives a handoff later
//	RolloutEnd    the batch has finished on every engine
//	EvalStart     a handoff later, on eval steps: the trainer starts the eval; its batch arrives
//	              a handoff later
//	EvalEnd       the eval batch has finished on every engine
//	Sleep         a handoff after the last batch's end: every engine is asleep
//	Wake          TrainTime later, and the wake-up's time after that: every engine is awake with
//	              the step's weights, the trainer's step is over
//
// A handoff is the trainer's turn between two things it asks of the engines: it marks where a
// batch starts before it sends the batch, and where one ends before it asks for more. LLM.sleep()
// also takes that long to offload the weights before vLLM records the sleep state. A Fleet
// delivers an edge once the simulation has reached it, so a handoff is also the time a reader of
// Fleet.Edges has to act on an edge before the next thing happens.
//
// Each rollout runs on weights synced just before it. At StartDelay the trainer publishes version
// 0, its initial policy, and every engine pauses and loads it for LoadTime; the first rollout
// starts when the load ends. At the end of step n's training the trainer publishes version n, and
// the engines wake up in vLLM's order for a weight sync: the weights come back (WakeTime), the
// engines load version n into them (LoadTime, the scheduler still paused), then the KV cache comes
// back (WakeTime) and the scheduler resumes: that is Wake. An engine that is awake when a load
// begins (its server restarted during the sleep) pauses for it instead.
// handoff is the simulated time of a handoff.
const Handoff = 500 * time.Millisecond
