package keyset

import (
	"maps"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Record returns r with only the keys the set keeps, in its metrics, its phases' (matched as
// step.PhaseKey spells them, "vllm/rollout/...") and its workers': a copy of what changes,
// sharing the rest with r, which it leaves alone (records are shared between sinks). The
// step's own fields (step, start, end, duration, scrapes, workers), plots and timeline stay as
// they are. prefix is the run's metric prefix. A nil set returns r itself.
func (s *Set) Record(r *step.Record, prefix string) *step.Record {
	if s == nil {
		return r
	}
	out := *r
	out.Metrics, out.Values = s.metrics(r.Metrics, r.Values, prefix, func(k string) string { return k })
	if r.Phases != nil {
		out.Phases = make(map[string]*step.Phase, len(r.Phases))
		for name, ph := range r.Phases {
			if ph == nil {
				out.Phases[name] = nil
				continue
			}
			p := *ph
			p.Metrics, p.Values = s.metrics(ph.Metrics, ph.Values, prefix, func(k string) string { return step.PhaseKey(prefix, name, k) })
			out.Phases[name] = &p
		}
	}
	if r.PerWorker != nil {
		out.PerWorker = make([]step.WorkerRecord, len(r.PerWorker))
		for i, w := range r.PerWorker {
			w.Metrics, w.Values = s.metrics(w.Metrics, w.Values, prefix, func(k string) string { return k })
			out.PerWorker[i] = w
		}
	}
	return &out
}

// metrics are the entries of m, and the values of vs (which m spells as keys), that the set
// keeps, each matched by the name as() gives its key.
func (s *Set) metrics(m map[string]float64, vs []vllm.Value, prefix string, as func(string) string) (map[string]float64, []vllm.Value) {
	var om map[string]float64
	if m != nil {
		om = maps.Clone(m)
		maps.DeleteFunc(om, func(k string, _ float64) bool { return !s.Keep(as(k)) })
	}
	var ov []vllm.Value
	for _, v := range vs {
		if s.Keep(as(v.Key(prefix))) {
			ov = append(ov, v)
		}
	}
	if vs != nil && ov == nil {
		ov = []vllm.Value{} // filtered to none, not "not computed" (nil means read back from JSON)
	}
	return om, ov
}
