package fleetmodel

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// The async loop (WorkloadConfig.Async) is asynchronous RL: the engines never sleep and keep
// generating while the trainer trains, and the trainer publishes a new policy version every
// StepTime. At StartDelay it publishes version 0, the initial policy, and every engine syncs it
// before the workload starts; then version k comes at start + k*StepTime, the end of step k.
// After each publish every engine syncs on its own: it pauses a fixed delay after the publish
// (its own, drawn from the seed, below a handoff), and a handoff later loads the weights for
// LoadTime with its requests held, then resumes with the new version. One engine (drawn from the
// seed too) pauses Lag later than its own delay: it generates on the old weights that much
// longer. Tokens generated between a publish and the engine's load of it are stale.

// asyncLoop is the async loop's state in a Sim.
type asyncLoop struct {
	start   time.Duration // the workload starts after the initial sync
	next    int           // the next version to publish
	Laggard int           // the engine that syncs Lag late, by index in Sim.engines
}

// initAsync sets up the async loop: the initial publish, the start of the workload after the
// initial sync, and the laggard.
func (s *Sim) initAsync() {
	w := &s.Cfg.Workload
	s.Async.start = w.StartDelay + workload.Handoff + w.LoadTime
	s.Async.Laggard = int(core.Mix64(uint64(s.Cfg.Seed)^0x6c6167676172) % uint64(len(s.Engines)))
	s.sched.Publishes = append(s.sched.Publishes, core.Publish{Version: 0, At: w.StartDelay})
}

// publishAt is the time the async loop publishes version v.
func (s *Sim) PublishAt(v int) time.Duration {
	if v == 0 {
		return s.Cfg.Workload.StartDelay
	}
	return s.Async.start + time.Duration(v)*s.Cfg.Workload.StepTime
}

// syncDelay is engine i's delay from a publish to its pause.
func (s *Sim) SyncDelay(i int) time.Duration {
	d := time.Duration(core.Unit(core.Mix64(uint64(s.Cfg.Seed)^0x73796e63^uint64(i+1)*0x9e3779b97f4a7c15)) * float64(workload.Handoff))
	if i == s.Async.Laggard {
		d += s.Cfg.Workload.Lag
	}
	return d
}

// asyncPublish publishes the next version at its time and schedules every engine's sync of it;
// the initial version is synced by every engine at once. The next publish, and the end of the
// step it closes, are known from now on.
func (s *Sim) asyncPublish() {
	v := s.Async.next
	at := s.PublishAt(v)
	s.Async.next++
	s.Publish(v, at)
	for i, e := range s.Engines {
		d := time.Duration(0)
		if v > 0 {
			d = s.SyncDelay(i)
		}
		e.Sync.Phase, e.Sync.At, e.Sync.Version = core.SyncPauseDue, at+d, v
	}
	next := s.PublishAt(v + 1)
	s.sched.Publishes = append(s.sched.Publishes, core.Publish{Version: v + 1, At: next})
	s.sched.Ends = append(s.sched.Ends, next)
}

// asyncSync takes engine e's sync one phase further.
func (s *Sim) asyncSync(e *core.Engine) {
	sy := &e.Sync
	switch sy.Phase {
	case core.SyncPauseDue:
		at := e.Pause(sy.At)
		sy.Paused = true
		sy.Phase, sy.At = core.SyncLoadDue, at+workload.Handoff
	case core.SyncLoadDue:
		sy.Loading = true
		e.StartLoad(sy.At)
		sy.Phase, sy.At = core.SyncEndDue, sy.At+s.Cfg.Workload.LoadTime
	case core.SyncEndDue:
		sy.Phase = core.SyncNone
		e.EndSync(sy.At, sy.Version)
	}
}

// publish takes the trainer's publish of version v at at into effect: a publish scheduled ahead
// is already in the schedule.
func (s *Sim) Publish(v int, at time.Duration) {
	p := core.Publish{Version: v, At: at}
	if s.published == len(s.sched.Publishes) {
		s.sched.Publishes = append(s.sched.Publishes, p)
	}
	s.published++
	s.publishes = append(s.publishes, p)
}

// takePublishes returns the publishes since the last call.
func (s *Sim) TakePublishes() []core.Publish {
	p := s.publishes
	s.publishes = nil
	return p
}

// simEvent is a kind of event that AdvanceTo takes at its exact time.
type simEvent uint8

const (
	evNone simEvent = iota
	evRestart
	evPublish
	EvSync
)

// nextEvent returns the simulation's next timed event: a server restart, an async publish or an
// engine's sync step. At equal times restarts come first, then publishes, then syncs engine by
// engine.
func (s *Sim) NextEvent() (at time.Duration, kind simEvent, engine int) {
	if len(s.restarts) > 0 {
		at, kind = s.restarts[0].at, evRestart
	}
	if !s.Cfg.Workload.Async {
		return at, kind, 0
	}
	if p := s.PublishAt(s.Async.next); kind == evNone || p < at {
		at, kind = p, evPublish
	}
	for i, e := range s.Engines {
		if e.Sync.Phase != core.SyncNone && e.Sync.At < at {
			at, kind, engine = e.Sync.At, EvSync, i
		}
	}
	return at, kind, engine
}
