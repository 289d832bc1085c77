package core

import (
	"time"
)

// syncPhase is where an engine is in a sync of the async loop.
type syncPhase uint8

const (
	SyncNone     syncPhase = iota
	SyncPauseDue           // the engine pauses at at
	SyncLoadDue            // the paused engine starts loading at at
	SyncEndDue             // the load ends at at
)

// engineSync is an engine's part in the weight syncs: what the current sync did (paused,
// loading), and in the async loop its next step.
type engineSync struct {
	Paused, Loading bool
	Phase           syncPhase
	At              time.Duration
	Version         int
}

// restart drops what a restarted server's engine did of a sync: the new process is neither
// paused nor loading, and misses the version; a pause not yet due still comes.
func (s *engineSync) Restart() {
	s.Paused, s.Loading = false, false
	if s.Phase != SyncPauseDue {
		s.Phase = SyncNone
	}
}
