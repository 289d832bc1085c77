package step

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// A phase is a named window inside a step (the rollout, an evaluation) that the trainer marks
// with start and end edges. Each edge takes effect once a boundary scrape of every target is in,
// so that every scrape's increases fall wholly inside or outside the phase: a scrape observed
// while the phase is open belongs to it. Its figures are the step's keys computed over its
// scrapes and its time only; a phase that ran several times in a step covers all of its runs,
// and a phase open at a step end ends there and opens again at the next step's start.
//
// Counters obey conservation: a scrape's increases go to the whole step and to at most one phase,
// so the phases' counts plus the counts outside any phase are the step's, exactly.

// Phase is one phase's share of a step.
type Phase struct {
	// DurationS is the phase's time in the step, over all of its runs.
	DurationS float64 `json:"duration_s"`
	// Intervals is how many times the phase was open in the step (a phase that spans a step end
	// counts in both steps).
	Intervals int `json:"intervals"`
	// Metrics are keyed as the record's Metrics, computed over the phase's scrapes and time.
	Metrics map[string]float64 `json:"metrics"`
	// Values are what Metrics spells as keys; not part of the JSON line.
	Values []vllm.Value `json:"-"`
	// Runs are the phase's runs in the step, in order, each cut at the step's start and end;
	// not part of the JSON line (the spans of a trace are made of them).
	Runs []Run `json:"-"`
}

// Run is one time a phase was open.
type Run struct {
	Start, End time.Time
}

// MaxPhaseName is the longest phase name.
const MaxPhaseName = 32

var phaseName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// ValidPhase checks a phase name: a lower-case letter, then up to 31 lower-case letters, digits
// and underscores, and not a name a step key starts with (a phase "kv_cache_usage_perc" would
// make its keys those of the whole step).
func ValidPhase(name string) error {
	if !phaseName.MatchString(name) {
		return fmt.Errorf("phase name %q: want a lower-case letter, then up to 31 lower-case letters, digits or underscores", name)
	}
	if keyNames[name] {
		return fmt.Errorf("phase name %q is the name of a step key; choose another (rollout, eval, ...)", name)
	}
	return nil
}

// keyNames are the first parts of every step key after the prefix.
var keyNames = func() map[string]bool {
	m := map[string]bool{NameFleetBusy: true, NameStragglerTail: true, NameWorkerIdle: true, KeyImbalance: true,
		NameWorkerAsleep: true, "busy_s": true, "idle_s": true, "last_busy_s": true, "asleep_s": true,
		"time": true, NameGenerationPerGenerating: true, NamePromptPerGenerating: true, policyKeyName: true}
	for _, f := range vllm.Gauges {
		m[f.Name] = true
	}
	for _, f := range vllm.Counters {
		m[f.Name] = true
	}
	for _, f := range vllm.Hists {
		m[f.Name] = true
	}
	for _, r := range vllm.Ratios {
		m[r.Name] = true
	}
	for _, r := range vllm.Rates {
		m[r.Name()] = true
	}
	for _, sm := range vllm.Sums {
		m[sm.Name] = true
	}
	for _, pt := range vllm.LabelParts {
		m[pt.Name] = true
	}
	for _, u := range vllm.Unfinisheds {
		m[u.Name] = true
	}
	for _, sr := range vllm.SumRatios {
		m[sr.Name] = true
	}
	for _, name := range ComputeNames {
		m[name] = true
	}
	return m
}()

// PhaseKey is the flat key under which sinks log a phase's key: the phase's name after the
// prefix ("vllm/prefix_cache_hit_rate" of phase rollout is "vllm/rollout/prefix_cache_hit_rate",
// "sglang/prefix_cache_hit_rate" is "sglang/rollout/prefix_cache_hit_rate"); prefix is the
// run's metric prefix, and a key's own is its engine kind's (see vllm.EnginePrefix).
func PhaseKey(prefix, phase, key string) string {
	for e := range vllm.NumEngines {
		p := vllm.EnginePrefix(prefix, e)
		if rest, ok := strings.CutPrefix(key, p+"/"); ok {
			return p + "/" + phase + "/" + rest
		}
	}
	return phase + "/" + key
}

// Scalars returns every value a tracker logs for the record, keyed flat: Metrics, and each
// phase's metrics under PhaseKey; prefix is the run's metric prefix. The map is read only (it
// is Metrics itself for a record without phases).
func (r *Record) Scalars(prefix string) map[string]float64 {
	if len(r.Phases) == 0 {
		return r.Metrics
	}
	m := maps.Clone(r.Metrics)
	if m == nil {
		m = map[string]float64{}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Phases)) {
		for k, v := range r.Phases[name].Metrics {
			m[PhaseKey(prefix, name, k)] = v
		}
	}
	return m
}

// phaseAcc accumulates one phase of the open step.
type phaseAcc struct {
	acc       *acc
	first     time.Time     // its first start in the step
	since     time.Time     // its current run's start, while open
	dur       time.Duration // its closed runs' time in the step
	intervals int
	runs      []Run // its closed runs in the step
}

// Begin marks the start of the run at ts, before any scrape: the first step starts there, and a
// worker first seen in any step counts whole the series whose _created is after it. A tracker
// never told (a recording without a start event) starts its first step at the first event and
// counts whole, for a worker first seen, only the series created after the open step's start.
func (t *Tracker) Begin(ts time.Time) {
	t.runStart, t.hasRunStart = ts, true
	if !t.started {
		t.started, t.start = true, ts
	}
	t.now = ts
}

// Phase returns the open phase, "" when none.
func (t *Tracker) Phase() string { return t.phase }

// StartPhase opens phase name at ts, after the boundary scrape of every target has been
// observed; an open phase of another name ends at ts. Starting the open phase does nothing.
// name must pass ValidPhase.
func (t *Tracker) StartPhase(name string, ts time.Time) {
	if name == t.phase {
		return
	}
	if !t.started {
		t.started, t.start = true, ts
	}
	t.now = ts
	t.EndPhase(t.phase, ts)
	pa := t.phases[name]
	if pa == nil {
		pa = &phaseAcc{acc: newAcc(), first: ts}
		t.phases[name] = pa
	}
	pa.since = ts
	pa.intervals++
	t.phase = name
}

// EndPhase ends phase name at ts, after the boundary scrape of every target has been observed.
// It reports false, and does nothing, when name is not the open phase.
func (t *Tracker) EndPhase(name string, ts time.Time) bool {
	if name == "" || name != t.phase {
		return false
	}
	t.now = ts
	pa := t.phases[name]
	pa.dur += ts.Sub(pa.since)
	pa.runs = append(pa.runs, Run{pa.since, ts})
	t.phase = ""
	return true
}

// openPhase is the open phase's accumulator, nil when none is open.
func (t *Tracker) openPhase() *phaseAcc {
	if t.phase == "" {
		return nil
	}
	return t.phases[t.phase]
}
