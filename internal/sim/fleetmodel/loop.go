package fleetmodel

import (
	"strconv"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// LoopEdgeKind names an edge of the colocated loop.
type LoopEdgeKind uint8

// The edges of a step of the colocated loop, in the order they come.
const (
	RolloutStart LoopEdgeKind = iota + 1
	RolloutEnd
	EvalStart
	EvalEnd
	Sleep
	Wake
)

var loopEdgeNames = [...]string{RolloutStart: "rollout_start", RolloutEnd: "rollout_end",
	EvalStart: "eval_start", EvalEnd: "eval_end", Sleep: "sleep", Wake: "wake"}

func (k LoopEdgeKind) String() string {
	if int(k) < len(loopEdgeNames) && loopEdgeNames[k] != "" {
		return loopEdgeNames[k]
	}
	return "LoopEdgeKind(" + strconv.Itoa(int(k)) + ")"
}

// LoopEdge is one edge of the colocated loop: what happened, in which step (the number of the
// step's rollout batch), at what simulated time.
type LoopEdge struct {
	Kind LoopEdgeKind
	Step int
	At   time.Duration
}

// loopState is where the colocated loop is; at is the time of its next timed edge.
type loopState uint8

const (
	loopIdle        loopState = iota // awake; the next rollout starts at at
	loopRolloutDue                   // the rollout batch arrives at at
	loopRollout                      // a rollout batch is being served
	loopEvalDue                      // the eval starts at at
	loopEvalArrive                   // the eval batch arrives at at
	loopEval                         // an eval batch is being served
	loopSleepDue                     // the engines fall asleep at at
	loopAsleep                       // the training ends at at: publish, and the wake-up begins
	loopWakeWeights                  // the weights are back at at, and the load begins
	loopLoading                      // the load ends at at
	loopWakeKV                       // the KV cache is back at at: Wake
	loopStart                        // the initial sync begins at at
	loopStartLoad                    // the initial load ends at at
)

// loop is the colocated loop's state in a Sim.
type loop struct {
	state       loopState
	at          time.Duration
	batchStart  time.Duration // arrival of the batch in flight
	rolloutTime time.Duration // the last rollout batch's duration, from its arrival
	edges       []LoopEdge    // not yet taken
}

// advanceLoop is advance for the colocated loop.
func (s *Sim) advanceLoop(t time.Duration) {
	l := &s.loop
	w := &s.Cfg.Workload
	for {
		switch l.state {
		case loopRollout, loopEval:
			s.runEngines(t)
			if !s.allIdle() {
				return
			}
			end := s.batchEnd(l.batchStart)
			if l.state == loopRollout {
				l.rolloutTime = end - l.batchStart
				s.done = append(s.done, BatchDone{s.batch, end})
				s.edge(RolloutEnd, end)
				if w.EvalEvery > 0 && s.batch%w.EvalEvery == 0 {
					l.state, l.at = loopEvalDue, end+workload.Handoff
					continue
				}
			} else {
				s.edge(EvalEnd, end)
			}
			l.state, l.at = loopSleepDue, end+workload.Handoff
			continue
		case loopIdle:
			if w.Batches > 0 && s.batch >= w.Batches {
				s.runEngines(t)
				return
			}
		}
		if l.at > t {
			s.runEngines(t)
			return
		}
		switch l.state {
		case loopStart:
			s.Publish(0, l.at)
			for _, e := range s.Engines {
				e.BeginSync(l.at)
			}
			l.state, l.at = loopStartLoad, l.at+w.LoadTime
		case loopStartLoad:
			for _, e := range s.Engines {
				e.EndSync(l.at, 0)
			}
			l.state = loopIdle // the first rollout starts now
		case loopIdle:
			s.batch++
			s.edge(RolloutStart, l.at)
			l.state, l.at = loopRolloutDue, l.at+workload.Handoff
		case loopRolloutDue:
			l.batchStart = l.at
			s.submit(s.gen.Batch(s.batch, l.at))
			l.state = loopRollout
		case loopEvalDue:
			s.edge(EvalStart, l.at)
			l.state, l.at = loopEvalArrive, l.at+workload.Handoff
		case loopEvalArrive:
			l.batchStart = l.at
			s.submit(s.gen.Eval(l.at))
			l.state = loopEval
		case loopSleepDue:
			for _, e := range s.Engines {
				e.Sleep(core.SleepLevel, l.at)
			}
			s.edge(Sleep, l.at)
			train := w.TrainTime
			if train == 0 {
				train = l.rolloutTime
			}
			l.state, l.at = loopAsleep, l.at+train
			// The step ends at the wake-up, which nothing can move from now on.
			s.sched.Ends = append(s.sched.Ends, l.at+2*w.WakeTime+w.LoadTime)
		case loopAsleep:
			s.Publish(s.batch, l.at)
			l.state, l.at = loopWakeWeights, l.at+w.WakeTime
		case loopWakeWeights:
			for _, e := range s.Engines {
				e.WakeWeights(l.at)
				e.BeginSync(l.at)
			}
			l.state, l.at = loopLoading, l.at+w.LoadTime
		case loopLoading:
			for _, e := range s.Engines {
				e.EndSync(l.at, s.batch)
			}
			l.state, l.at = loopWakeKV, l.at+w.WakeTime
		case loopWakeKV:
			for _, e := range s.Engines {
				e.WakeKV(l.at)
			}
			s.edge(Wake, l.at)
			l.state, l.at = loopIdle, l.at+w.Pause
		}
	}
}

func (s *Sim) edge(k LoopEdgeKind, at time.Duration) {
	s.loop.edges = append(s.loop.edges, LoopEdge{k, s.batch, at})
}

// takeEdges returns the colocated loop's edges since the last call.
func (s *Sim) TakeEdges() []LoopEdge {
	e := s.loop.edges
	s.loop.edges = nil
	return e
}
