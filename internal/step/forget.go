package step

// Forget drops every worker of target and its last-success time, so that if the target comes
// back its engines start as new workers (a baseline, or counted from zero when _created says
// they started since). Data already in the open step stays.
func (t *Tracker) Forget(target string) {
	for id := range t.workers {
		if id.Target == target {
			delete(t.workers, id)
		}
	}
	for id := range t.seenAt {
		if id.Target == target {
			delete(t.seenAt, id)
		}
	}
	delete(t.lastOK, target)
}
