package csvfile

import (
	"slices"
	"strings"
	"sync"

	"github.com/vllmstat/vllmstat/internal/config/yamlx"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// keyNames are the names that step keys have after their prefix, by name, with what may follow
// each: the spec's (vllm.KeyNames) and the step tracker's fleet-balance figures.
var keyNames = sync.OnceValue(func() map[string]vllm.KeyName {
	m := map[string]vllm.KeyName{}
	add := func(kn vllm.KeyName) {
		old := m[kn.Name]
		old.Name, old.Split = kn.Name, old.Split || kn.Split
		for _, s := range kn.Stats {
			if !slices.Contains(old.Stats, s) {
				old.Stats = append(old.Stats, s)
			}
		}
		m[kn.Name] = old
	}
	for _, kn := range vllm.KeyNames() {
		add(kn)
	}
	for _, name := range []string{step.NameFleetBusy, step.NameStragglerTail, step.KeyImbalance} {
		add(vllm.KeyName{Name: name, Stats: []string{""}})
	}
	for _, name := range []string{step.NameWorkerIdle, step.NameWorkerAsleep} {
		add(vllm.KeyName{Name: name, Stats: []string{vllm.StatMean, vllm.StatMax}})
	}
	for _, key := range []string{step.KeyWorstHitRate, step.KeyWorstPreemptions} {
		v := vllm.ParseName(key)
		add(vllm.KeyName{Name: v.Name, Stats: []string{v.Stat}})
	}
	// the time ledger's and the policy versions' keys
	for s := range step.NumStates {
		add(vllm.KeyName{Name: step.StateKey(s), Stats: []string{""}})
		add(vllm.KeyName{Name: step.FractionKey(s), Stats: []string{""}})
	}
	for _, name := range []string{step.NameEngineTime, step.NameGenerationPerGenerating, step.NamePromptPerGenerating,
		step.NamePolicyVersion, step.NameEngineVersionMin, step.NameEngineVersionMax, step.NameEnginesBehind,
		step.NameStaleTokens, step.NameStaleFraction} {
		add(vllm.KeyName{Name: name, Stats: []string{""}})
	}
	add(vllm.KeyName{Name: step.NamePublishLag, Stats: []string{vllm.StatMean, vllm.StatMax}})
	for _, name := range step.ComputeNames {
		add(vllm.KeyName{Name: name, Stats: []string{""}})
	}
	return m
})

// knownName reports whether a step key may be prefix/rest, the part after a prefix: a name of
// keyNames with its split label's value if it has one and one of its statistics.
func knownName(rest string) bool {
	v := vllm.ParseName(rest)
	kn, ok := keyNames()[v.Name]
	return ok && kn.Split == (v.Label != "") && slices.Contains(kn.Stats, v.Stat)
}

// enginePrefixes are the first parts of the keys of every engine kind in a run whose metric
// prefix is prefix, each once.
func enginePrefixes(prefix string) []string {
	var out []string
	for e := range vllm.NumEngines {
		if p := vllm.EnginePrefix(prefix, e); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// knownKey reports whether a step record (or one of its phases, see step.PhaseKey) of a run
// whose metric prefix is prefix may have key.
func knownKey(prefix, key string) bool {
	for _, p := range enginePrefixes(prefix) {
		rest, ok := strings.CutPrefix(key, p+"/")
		if !ok {
			continue
		}
		if knownName(rest) {
			return true
		}
		if phase, tail, ok := strings.Cut(rest, "/"); ok && step.ValidPhase(phase) == nil && knownName(tail) {
			return true
		}
	}
	return false
}

// nearestKey returns the key nearest to key, which no step record has, among those one may
// have: key under the run's prefix when it lacks one, else one a typo or two away (in the
// same phase, and with the same split label's value, as key); "" when none is near.
func nearestKey(prefix, key string) string {
	if k := prefix + "/" + key; knownKey(prefix, k) {
		return k
	}
	var keys []string
	for _, p := range enginePrefixes(prefix) {
		heads := []string{p}
		if rest, ok := strings.CutPrefix(key, p+"/"); ok {
			if phase, _, ok := strings.Cut(rest, "/"); ok && step.ValidPhase(phase) == nil {
				heads = append(heads, p+"/"+phase)
			}
		}
		// A split label's value is the key's own third part, if it has one: the values are
		// the engines', not the spec's.
		parts := strings.Split(key, "/")
		for _, head := range heads {
			for _, kn := range keyNames() {
				name := head + "/" + kn.Name
				if kn.Split {
					n := strings.Count(head, "/") + 2 // the part after the name
					if n >= len(parts) {
						continue
					}
					name += "/" + parts[n]
				}
				for _, s := range kn.Stats {
					if s == "" {
						keys = append(keys, name)
					} else {
						keys = append(keys, name+"/"+s)
					}
				}
			}
		}
	}
	slices.Sort(keys) // the same answer whatever the map's order
	return yamlx.Suggest(key, keys)
}
