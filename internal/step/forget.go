package step

// Forget drops every worker of the targets and their last-success times, for targets removed
// from the fleet. If a target comes back, its engines are new workers: the first scrape of each
// is a baseline, unless its _created says the engine started after the target last answered
// (or, when it never did, after the latest timestamp the tracker had been fed), in which case
// all of its count is new; and its first scrape stands for no busy or idle time. What the
// targets' workers already gave the open step stays in it, with their labels. Forgetting many
// targets in one call costs one pass over the workers, not one per target.
func (t *Tracker) Forget(targets ...string) {
	if len(targets) == 0 {
		return
	}
	gone := make(map[string]bool, len(targets))
	for _, target := range targets {
		gone[target] = true
	}
	for id := range t.workers {
		if gone[id.Target] {
			delete(t.workers, id)
		}
	}
	for _, target := range targets {
		// The collector forgets a target some time after it left (it may come back meanwhile):
		// an engine that restarted in between is new since the target's last answer.
		since := t.now
		if tgt := t.targets[target]; tgt != nil && tgt.hasLastOK {
			since = tgt.lastOK
		}
		delete(t.targets, target)
		t.labels.forget(target)
		if t.started {
			t.forgot[target] = since
		}
	}
}
