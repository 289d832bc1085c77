package collector

import (
	"maps"

	"github.com/vllmstat/vllmstat/internal/target"
)

// syncLabels tells the tracker, and the recording, the labels of every target whose labels
// changed: a new target with labels, a target whose labels changed, or lost them. Removed
// targets are no longer known (the tracker keeps their labels for the open step itself), so a
// target that comes back with labels gets them again. Targets without labels, as all are in a
// run without discovery, write nothing.
func (s *state) syncLabels(ts []target.Target, removed []string) {
	if s.labels == nil {
		s.labels = map[string]map[string]string{}
	}
	for _, u := range removed {
		delete(s.labels, u)
	}
	for _, t := range ts {
		if maps.Equal(s.labels[t.URL], t.Labels) { // nil equals empty
			continue
		}
		var ls map[string]string
		if len(t.Labels) > 0 {
			ls = maps.Clone(t.Labels)
			s.labels[t.URL] = ls
		} else {
			delete(s.labels, t.URL)
		}
		s.tracker.SetTargetLabels(t.URL, ls)
		if st := s.targets[t.URL]; st != nil {
			st.Labels = ls
		}
		if rw := s.c.opt.Recorder; rw != nil {
			if err := rw.TargetLabels(s.stamp(), t.URL, ls); err != nil && !s.recordErr {
				s.recordErr = true
				s.c.log.Error("recording failed; the run goes on without it", "err", err)
			}
		}
	}
}
