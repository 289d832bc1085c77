package report

import (
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// rolloutPhase is the phase listed first: the engines' generation, which the training time
// dilutes in the whole step's rates and means.
const rolloutPhase = "rollout"

// pagePhase is one phase of the run's steps as the page carries it.
type pagePhase struct {
	Name string `json:"name"`
	// Dur is the phase's time in each step, null in steps without it.
	Dur values `json:"dur"`
	// Runs is how many times the phase was open in each step, 0 in steps without it.
	Runs []int `json:"runs"`
}

// figure is a key that the step view shows for the whole step and each of its phases: its
// name without the prefix and a short label.
type figure struct {
	Key   string `json:"key"`
	Label string `json:"label"`
}

// phaseFigures are the step view's figures of each phase, those that the training time
// dilutes in the whole step first.
var phaseFigures = []figure{
	{rest(vllm.Value{Name: vllm.Rate{Of: vllm.GenerationTokens}.Name()}), "gen tok/s"},
	{rest(vllm.Value{Name: vllm.Rate{Of: vllm.PromptTokens}.Name()}), "prompt tok/s"},
	{rest(vllm.Value{Name: vllm.Gauges[vllm.KVUsage].Name, Stat: vllm.StatMean}), "KV mean"},
	{rest(vllm.Value{Name: vllm.Gauges[vllm.KVUsage].Name, Stat: vllm.StatMax}), "KV max"},
	{rest(vllm.Value{Name: vllm.Gauges[vllm.Running].Name, Stat: vllm.StatMean}), "running mean"},
	{rest(vllm.Value{Name: vllm.Gauges[vllm.Waiting].Name, Stat: vllm.StatMean}), "waiting mean"},
	{rest(vllm.Value{Name: vllm.PrefixHitRate.Name}), "hit rate"},
	{rest(vllm.Value{Name: vllm.Counters[vllm.Preemptions].Name}), "preemptions"},
	{rest(vllm.Value{Name: vllm.Hists[vllm.TTFT].Name, Stat: vllm.StatP50}), "TTFT p50 s"},
}

// rest is v's key without a prefix.
func rest(v vllm.Value) string { return strings.TrimPrefix(v.Key(""), "/") }

// addPhases adds the phases of recs to d, which holds their whole-step keys already: the
// phases, the rollout first, then by name; each phase's keys after the whole step's, as
// trackers log them (step.PhaseKey under the key's own prefix), sorted within the phase; and
// for every key its phase ("" for the whole step's) and the whole step's key that it is the
// phase's value of. A page of records without phases is left as it was.
func addPhases(d *pageData, recs []*step.Record) {
	seen := map[string]map[string]bool{} // phase -> its keys, in the whole step's spelling
	for _, r := range recs {
		for name, p := range r.Phases {
			if p == nil {
				continue
			}
			if seen[name] == nil {
				seen[name] = map[string]bool{}
			}
			for k := range p.Metrics {
				seen[name][k] = true
			}
		}
	}
	if len(seen) == 0 {
		return
	}
	names := slices.SortedFunc(maps.Keys(seen), func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == rolloutPhase:
			return -1
		case b == rolloutPhase:
			return 1
		}
		return strings.Compare(a, b)
	})
	d.KeyPhase = make([]string, len(d.Keys))
	d.KeyOf = slices.Clone(d.Keys)
	for _, name := range names {
		p := pagePhase{Name: name, Dur: make(values, len(recs)), Runs: make([]int, len(recs))}
		for j, r := range recs {
			p.Dur[j] = math.NaN()
			if ph := r.Phases[name]; ph != nil {
				p.Dur[j], p.Runs[j] = ph.DurationS, ph.Intervals
			}
		}
		d.Phases = append(d.Phases, p)
		for _, k := range slices.Sorted(maps.Keys(seen[name])) {
			prefix := "" // as groupKeys cuts it
			if i := strings.IndexByte(k, '/'); i >= 0 {
				prefix = k[:i]
			}
			d.Keys = append(d.Keys, step.PhaseKey(prefix, name, k))
			d.KeyPhase = append(d.KeyPhase, name)
			d.KeyOf = append(d.KeyOf, k)
		}
	}
	d.PhaseFigures = phaseFigures
}

// value is key i of d in r: the whole step's, or its phase's; false when r has none.
func (d *pageData) value(r *step.Record, i int) (float64, bool) {
	if d.KeyPhase == nil || d.KeyPhase[i] == "" {
		v, ok := r.Metrics[d.Keys[i]]
		return v, ok
	}
	p := r.Phases[d.KeyPhase[i]]
	if p == nil {
		return 0, false
	}
	v, ok := p.Metrics[d.KeyOf[i]]
	return v, ok
}
