package fleetmodel

import (
	"slices"

	"github.com/vllmstat/vllmstat/internal/sim/core"
)

// GroundTruth returns what the simulation did up to now.
func (s *Sim) GroundTruth() core.GroundTruth {
	g := core.GroundTruth{At: s.Time, Publishes: slices.Clone(s.sched.Publishes[:s.published])}
	for _, end := range s.sched.Ends {
		if end > s.Time {
			break
		}
		g.StepEnds = append(g.StepEnds, end)
	}
	for _, e := range s.Engines {
		l := e.Led // a copy: the open span is closed in it only
		l.Steps = slices.Clone(l.Steps)
		through := max(l.Since, s.Time)
		l.Account(through)
		t := core.EngineTruth{Server: e.Server, Engine: e.Index, Through: through, State: l.State, Versions: slices.Clone(l.Versions),
			Steps: make([]core.StepTruth, len(g.StepEnds)+1)}
		for i, st := range l.Steps {
			j := min(i, len(g.StepEnds))
			for k := range st.Time {
				t.Steps[j].Time[k] += st.Time[k]
				t.Time[k] += st.Time[k]
			}
			t.Steps[j].GenerationTokens += st.GenerationTokens
			t.Steps[j].StaleTokens += st.StaleTokens
			t.Steps[j].Lengths.Add(&st.Lengths)
			t.GenerationTokens += st.GenerationTokens
			t.StaleTokens += st.StaleTokens
		}
		g.Engines = append(g.Engines, t)
	}
	return g
}
