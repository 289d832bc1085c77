package step

import "maps"

// targetLabels are the labels discovery gave each target (file_sd's "labels"), which its
// workers carry into per_worker records and Intervals. A forgotten target keeps its labels
// until the open step ends, since its workers' data stays in that step.
type targetLabels struct {
	by   map[string]map[string]string // never changed in place: records share the maps
	drop map[string]bool              // forgotten targets whose labels go at the step end
}

// SetTargetLabels sets the labels of target's workers (none: nil or empty), from now on and for
// the open step. The live collector and replay call it at the same point of the event stream
// (a recording's "target" event), so that both produce the same records.
func (t *Tracker) SetTargetLabels(target string, labels map[string]string) {
	tl := &t.labels
	delete(tl.drop, target)
	if len(labels) == 0 {
		delete(tl.by, target)
		return
	}
	if tl.by == nil {
		tl.by = map[string]map[string]string{}
	}
	tl.by[target] = maps.Clone(labels)
}

// of returns target's labels, nil when it has none. The map is shared: read only.
func (tl *targetLabels) of(target string) map[string]string { return tl.by[target] }

// forget marks target's labels to go when the open step ends.
func (tl *targetLabels) forget(target string) {
	if _, ok := tl.by[target]; !ok {
		return
	}
	if tl.drop == nil {
		tl.drop = map[string]bool{}
	}
	tl.drop[target] = true
}

// stepEnded drops the labels of the targets forgotten during the step that just ended.
func (tl *targetLabels) stepEnded() {
	for target := range tl.drop {
		delete(tl.by, target)
	}
	clear(tl.drop)
}
