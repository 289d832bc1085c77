package step

// Forget drops every worker of target and its last-success time, for a target removed from the
// fleet. If the target comes back, its engines are new workers: the first scrape of each is a
// baseline, unless its _created says the engine started after the target was forgotten (after
// the latest timestamp the tracker had been fed), in which case all of its count is new; and its
// first scrape stands for no busy or idle time. What the target's workers already gave the open
// step stays in it, with its labels.
func (t *Tracker) Forget(target string) {
	for id := range t.workers {
		if id.Target == target {
			delete(t.workers, id)
		}
	}
	delete(t.targets, target)
	t.labels.forget(target)
	if t.started {
		t.forgot[target] = t.now
	}
}
