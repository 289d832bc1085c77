package sim

import "time"

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
	laggard int           // the engine that syncs Lag late, by index in Sim.engines
}

// syncPhase is where an engine is in a sync of the async loop.
type syncPhase uint8

const (
	syncNone     syncPhase = iota
	syncPauseDue           // the engine pauses at at
	syncLoadDue            // the paused engine starts loading at at
	syncEndDue             // the load ends at at
)

// engineSync is an engine's part in the weight syncs: what the current sync did (paused,
// loading), and in the async loop its next step.
type engineSync struct {
	paused, loading bool
	phase           syncPhase
	at              time.Duration
	version         int
}

// restart drops what a restarted server's engine did of a sync: the new process is neither
// paused nor loading, and misses the version; a pause not yet due still comes.
func (s *engineSync) restart() {
	s.paused, s.loading = false, false
	if s.phase != syncPauseDue {
		s.phase = syncNone
	}
}

// initAsync sets up the async loop: the initial publish, the start of the workload after the
// initial sync, and the laggard.
func (s *Sim) initAsync() {
	w := &s.cfg.Workload
	s.async.start = w.StartDelay + handoff + w.LoadTime
	s.async.laggard = int(mix64(uint64(s.cfg.Seed)^0x6c6167676172) % uint64(len(s.engines)))
	s.sched.publishes = append(s.sched.publishes, Publish{0, w.StartDelay})
}

// publishAt is the time the async loop publishes version v.
func (s *Sim) publishAt(v int) time.Duration {
	if v == 0 {
		return s.cfg.Workload.StartDelay
	}
	return s.async.start + time.Duration(v)*s.cfg.Workload.StepTime
}

// syncDelay is engine i's delay from a publish to its pause.
func (s *Sim) syncDelay(i int) time.Duration {
	d := time.Duration(unit(mix64(uint64(s.cfg.Seed)^0x73796e63^uint64(i+1)*0x9e3779b97f4a7c15)) * float64(handoff))
	if i == s.async.laggard {
		d += s.cfg.Workload.Lag
	}
	return d
}

// asyncPublish publishes the next version at its time and schedules every engine's sync of it;
// the initial version is synced by every engine at once. The next publish, and the end of the
// step it closes, are known from now on.
func (s *Sim) asyncPublish() {
	v := s.async.next
	at := s.publishAt(v)
	s.async.next++
	s.publish(v, at)
	for i, e := range s.engines {
		d := time.Duration(0)
		if v > 0 {
			d = s.syncDelay(i)
		}
		e.sync.phase, e.sync.at, e.sync.version = syncPauseDue, at+d, v
	}
	next := s.publishAt(v + 1)
	s.sched.publishes = append(s.sched.publishes, Publish{v + 1, next})
	s.sched.ends = append(s.sched.ends, next)
}

// asyncSync takes engine e's sync one phase further.
func (s *Sim) asyncSync(e *Engine) {
	sy := &e.sync
	switch sy.phase {
	case syncPauseDue:
		at := e.pause(sy.at)
		sy.paused = true
		sy.phase, sy.at = syncLoadDue, at+handoff
	case syncLoadDue:
		sy.loading = true
		e.startLoad(sy.at)
		sy.phase, sy.at = syncEndDue, sy.at+s.cfg.Workload.LoadTime
	case syncEndDue:
		sy.phase = syncNone
		e.endSync(sy.at, sy.version)
	}
}

// publish takes the trainer's publish of version v at at into effect: a publish scheduled ahead
// is already in the schedule.
func (s *Sim) publish(v int, at time.Duration) {
	p := Publish{v, at}
	if s.published == len(s.sched.publishes) {
		s.sched.publishes = append(s.sched.publishes, p)
	}
	s.published++
	s.publishes = append(s.publishes, p)
}

// takePublishes returns the publishes since the last call.
func (s *Sim) takePublishes() []Publish {
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
	evSync
)

// nextEvent returns the simulation's next timed event: a server restart, an async publish or an
// engine's sync step. At equal times restarts come first, then publishes, then syncs engine by
// engine.
func (s *Sim) nextEvent() (at time.Duration, kind simEvent, engine int) {
	if len(s.restarts) > 0 {
		at, kind = s.restarts[0].at, evRestart
	}
	if !s.cfg.Workload.Async {
		return at, kind, 0
	}
	if p := s.publishAt(s.async.next); kind == evNone || p < at {
		at, kind = p, evPublish
	}
	for i, e := range s.engines {
		if e.sync.phase != syncNone && e.sync.at < at {
			at, kind, engine = e.sync.at, evSync, i
		}
	}
	return at, kind, engine
}
