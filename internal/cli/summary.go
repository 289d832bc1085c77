package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/timeline"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// summaryLine is the one-line stderr summary of a closed step, with the figures of its rollout
// phase at the end when it has one. The figures are those of the engine kind whose keys the
// record holds (an SGLang fleet's are under "sglang/"); a record with keys of two kinds (a
// fleet of vLLM and SGLang servers) shows each kind's, after its name. Absent values show as
// "-", without their unit.
func summaryLine(r *step.Record, prefix string) string {
	parts := []string{
		fmt.Sprintf("step %d", r.Step),
		fmt.Sprintf("%.1fs", r.DurationS),
		fmt.Sprintf("workers %d", r.Workers),
		fmt.Sprintf("scrapes %d ok %d failed", r.Scrapes.OK, r.Scrapes.Failed),
	}
	kinds := recordKinds(r, prefix)
	if len(kinds) == 1 {
		parts = append(parts, engineParts(r.Metrics, prefix, kinds[0], stragglerName(r))...)
	} else {
		// The stragglers are named once, after every kind's figures: a record does not say
		// which kind each is of.
		for _, k := range kinds {
			ps := engineParts(r.Metrics, prefix, k, "")
			ps[0] = vllm.Engines[k].Name + " " + ps[0]
			parts = append(parts, ps...)
		}
		if s := stragglerName(r); s != "" {
			parts = append(parts, "stragglers "+s)
		}
	}
	if p := rolloutPart(r, prefix); p != "" {
		parts = append(parts, p)
	}
	return strings.Join(parts, " | ")
}

// engineParts are the summary line's figures of one engine kind's keys; straggler names the
// step's stragglers after the tail, "" for none.
func engineParts(metrics map[string]float64, prefix string, kind vllm.Engine, straggler string) []string {
	v := formatter(metrics, prefix, kind)
	preempt := "preempt " + v(keyPreemptions, "%.0f", 1)
	if kind == vllm.TRTLLM {
		// TensorRT-LLM's page counts no preemptions: its nearest figure is the requests paused.
		preempt = "paused " + v(keyPausedMax, "%.0f", 1)
	}
	parts := []string{
		"hit " + v(keyHitRate, "%.1f%%", 100) + parens(computedShare(metrics, prefix, kind)),
		preempt,
		"kv " + v(keyKVMean, "%.2f", 1) + "/" + v(keyKVMax, "%.2f", 1),
		"run " + v(keyRunMean, "%.1f", 1) + " wait " + v(keyWaitMean, "%.1f", 1),
		"gen " + v(keyGenPerS, "%.0f tok/s", 1),
		"ttft p50 " + v(keyTTFTP50, "%.3fs", 1),
		"tail " + v(keyTail, "%.1fs", 1) + parens(straggler),
	}
	// Figures of newer engines, shown only where the step has them.
	if s := v(keyTruncated, "%.1f%%", 100); s != "-" {
		parts = append(parts, "clipped "+s)
	}
	if s := v(keyMFU, "%.1f%%", 100); s != "-" {
		parts = append(parts, "mfu "+s)
	}
	return parts
}

// computedShare is the share of the step's prompt tokens that the engines computed rather than
// found cached or had transferred ("computed 12.5%"), "" where the page does not split them.
func computedShare(metrics map[string]float64, prefix string, kind vllm.Engine) string {
	key := func(v vllm.Value) (float64, bool) {
		v.Kind = kind
		x, ok := metrics[v.Key(prefix)]
		return x, ok
	}
	c, ok := key(keyComputed)
	if !ok {
		return ""
	}
	var all float64
	for _, k := range []vllm.Value{keyComputed, keyCached, keyTransferred} {
		x, _ := key(k)
		all += x
	}
	if all <= 0 {
		return ""
	}
	return fmt.Sprintf("computed %.1f%%", 100*c/all)
}

// recordKinds are the engine kinds whose keys the record (or one of its phases) holds, in the
// order of the kinds; vLLM alone for a record without any. With a metric prefix of one's own,
// which names every kind's keys alike (see vllm.EnginePrefix), the keys tell no kind apart:
// they are read as vLLM's, which are spelled the same.
func recordKinds(r *step.Record, prefix string) []vllm.Engine {
	var has [vllm.NumEngines]bool
	see := func(m map[string]float64) {
		for k := range m {
			if v, ok := vllm.ParseKey(prefix, k); ok {
				has[v.Kind] = true
			}
		}
	}
	see(r.Metrics)
	for _, p := range r.Phases {
		see(p.Metrics)
	}
	var kinds []vllm.Engine
	for k, ok := range has {
		if ok {
			kinds = append(kinds, vllm.Engine(k))
		}
	}
	if len(kinds) == 0 {
		kinds = append(kinds, vllm.VLLM)
	}
	return kinds
}

// rolloutPhase is the phase whose figures the summary line and watch show beside the whole
// step's: the engines generate during the rollout, and the training time after it dilutes
// the whole step's rates and means.
const rolloutPhase = "rollout"

// rolloutPart is the summary of the step's rollout phase ("rollout 4.2s gen 2345 tok/s hit
// 81.0% kv 0.61/0.97"): its time, generation rate, hit rate and KV usage mean and max, the
// figures that differ from the whole step's, each engine kind's after its name when the record
// has keys of two; "" when the step has no rollout phase.
func rolloutPart(r *step.Record, prefix string) string {
	p := r.Phases[rolloutPhase]
	if p == nil {
		return ""
	}
	kinds := recordKinds(r, prefix)
	s := fmt.Sprintf("%s %.1fs", rolloutPhase, p.DurationS)
	for _, k := range kinds {
		v := formatter(p.Metrics, prefix, k)
		if len(kinds) > 1 {
			s += " " + vllm.Engines[k].Name
		}
		s += fmt.Sprintf(" gen %s hit %s kv %s/%s", v(keyGenPerS, "%.0f tok/s", 1), v(keyHitRate, "%.1f%%", 100), v(keyKVMean, "%.2f", 1), v(keyKVMax, "%.2f", 1))
	}
	return s
}

// phaseNames are the names of the step's phases, the rollout first, then by name.
func phaseNames(r *step.Record) []string {
	names := slices.Sorted(maps.Keys(r.Phases))
	if i := slices.Index(names, rolloutPhase); i > 0 {
		names = slices.Insert(slices.Delete(names, i, i+1), 0, rolloutPhase)
	}
	return names
}

// times is "once" or "N times".
func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// formatter formats values of metrics, keyed under prefix as engine kind's, scaled and with a
// unit; an absent value is a bare "-".
func formatter(metrics map[string]float64, prefix string, kind vllm.Engine) func(key vllm.Value, format string, scale float64) string {
	return func(key vllm.Value, format string, scale float64) string {
		key.Kind = kind
		x, ok := metrics[key.Key(prefix)]
		if !ok {
			return "-"
		}
		return fmt.Sprintf(format, x*scale)
	}
}

// The values of the summary line, the demo table and watch's session summary, from the family
// spec; their keys are spelled by vllm.Value.Key.
var (
	keyHitRate     = vllm.Value{Name: vllm.PrefixHitRate.Name}
	keyPreemptions = vllm.Value{Name: vllm.Counters[vllm.Preemptions].Name}
	keyPausedMax   = vllm.Value{Name: vllm.Gauges[vllm.TRTLLMPausedReqs].Name, Stat: vllm.StatMax}
	keyKVMean      = vllm.Value{Name: vllm.Gauges[vllm.KVUsage].Name, Stat: vllm.StatMean}
	keyKVMax       = vllm.Value{Name: vllm.Gauges[vllm.KVUsage].Name, Stat: vllm.StatMax}
	keyRunMean     = vllm.Value{Name: vllm.Gauges[vllm.Running].Name, Stat: vllm.StatMean}
	keyRunMax      = vllm.Value{Name: vllm.Gauges[vllm.Running].Name, Stat: vllm.StatMax}
	keyWaitMean    = vllm.Value{Name: vllm.Gauges[vllm.Waiting].Name, Stat: vllm.StatMean}
	keyWaitMax     = vllm.Value{Name: vllm.Gauges[vllm.Waiting].Name, Stat: vllm.StatMax}
	keyGenPerS     = vllm.Value{Name: vllm.Rate{Of: vllm.GenerationTokens}.Name()}
	keyPromptPerS  = vllm.Value{Name: vllm.Rate{Of: vllm.PromptTokens}.Name()}
	keyTTFTP50     = vllm.Value{Name: vllm.Hists[vllm.TTFT].Name, Stat: vllm.StatP50}
	keyTTFTP95     = vllm.Value{Name: vllm.Hists[vllm.TTFT].Name, Stat: vllm.StatP95}
	keyTail        = vllm.Value{Name: step.NameStragglerTail}
	keyTruncated   = vllm.Value{Name: vllm.TruncatedFraction.Name}
	keyMFU         = vllm.Value{Name: step.NameMFU}
	keyComputed    = vllm.Value{Name: vllm.PromptComputed.Name}
	keyCached      = vllm.Value{Name: vllm.PromptCached.Name}
	keyTransferred = vllm.Value{Name: vllm.PromptTransferred.Name}
)

// stragglerName names the step's latest straggler and how many more there are ("h:8000#1 +2"),
// "" when it has none.
func stragglerName(r *step.Record) string {
	if len(r.Stragglers) == 0 {
		return ""
	}
	name := timeline.Label(r.Stragglers[0].ID())
	if n := len(r.Stragglers) - 1; n > 0 {
		name += fmt.Sprintf(" +%d", n)
	}
	return name
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// balanceLines names a step's stragglers and worst workers, one line each, for views that have
// room for them (watch's session summary).
func balanceLines(r *step.Record) []string {
	var out []string
	if len(r.Stragglers) > 0 {
		names := make([]string, len(r.Stragglers))
		for i, s := range r.Stragglers {
			names[i] = fmt.Sprintf("%s (last busy %.1fs)", timeline.Label(s.ID()), s.LastBusyS)
		}
		out = append(out, "stragglers: "+strings.Join(names, ", "))
	}
	if w := r.WorstWorkers; w != nil {
		if v := w.PrefixCacheHitRate; v != nil {
			out = append(out, fmt.Sprintf("lowest hit rate: %s %.1f%%", timeline.Label(v.ID()), 100*v.Value))
		}
		if v := w.NumPreemptions; v != nil {
			out = append(out, fmt.Sprintf("most preemptions: %s %.0f", timeline.Label(v.ID()), v.Value))
		}
	}
	return out
}
