package step

import (
	"errors"
	"hash/maphash"
	"syscall"
)

// Refused reports whether a failed scrape's connection was refused: nothing listened on the
// target's port. Every scrape of a target refused since the run started is evidence that its
// server was not there (see Tracker.Observe).
func Refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// Added tells the tracker that target joined the run while it ran (through the API, discovery
// or a change of the configuration), not at its start: connections it refused before its first
// page say nothing of when its server started (a trainer that resumes registers engines that
// have run for hours), and its first page is a baseline unless _created says otherwise.
func (t *Tracker) Added(target string) {
	tgt := t.target(target)
	tgt.late = true
}

// tried notes a failed scrape of tgt (its first if first): whether every scrape so far was
// refused.
func (tgt *targetState) tried(first bool, err error) {
	tgt.refused = (first || tgt.refused) && err != nil && Refused(err)
}

// departedWorkers remembers the workers the run forgot, as 64-bit hashes (about 30 bytes each
// with the map's own): one that comes back is no new worker, and its target's pages that did not show it
// meanwhile are no evidence that it was not there before (see Tracker.Observe).
type departedWorkers struct {
	seed maphash.Seed
	set  map[uint64]struct{}
}

func (d *departedWorkers) add(id WorkerID) {
	if d.set == nil {
		d.seed, d.set = maphash.MakeSeed(), map[uint64]struct{}{}
	}
	d.set[maphash.Comparable(d.seed, id)] = struct{}{}
}

func (d *departedWorkers) has(id WorkerID) bool {
	if d.set == nil {
		return false
	}
	_, ok := d.set[maphash.Comparable(d.seed, id)]
	return ok
}

// target returns the state of target, made when it has none yet.
func (t *Tracker) target(target string) *targetState {
	tgt := t.targets[target]
	if tgt == nil {
		tgt = &targetState{}
		t.targets[target] = tgt
	}
	return tgt
}
