package report

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
)

// kindColumns are the values of key name (without prefix) in every step, in phase's values
// ("" the whole step's), by the prefix of each engine kind that has the key.
func (d *pageData) kindColumns(phase, name string) map[string]values {
	out := map[string]values{}
	if phase != "" && d.KeyPhase == nil {
		return out
	}
	for i, k := range d.Keys {
		if d.KeyPhase != nil {
			if d.KeyPhase[i] != phase {
				continue
			}
			k = d.KeyOf[i]
		}
		if k == name {
			out[""] = d.Values[i]
		} else if prefix, ok := strings.CutSuffix(k, "/"+name); ok {
			out[prefix] = d.Values[i]
		}
	}
	return out
}

// shareSums adds up, over the steps and the engine kinds, the ledger's engine-seconds in
// phase ("" the whole step): in all states (engine_s) and in each state, by the steps too.
// A kind's step without engine_s counts for nothing; a state it lacks in a step where it has
// engine_s is 0 there.
type shareSums struct {
	engine, generating float64
	states             map[string]float64
	stepEngine         []float64
	stepGenerating     []float64
	kinds              []string
	// undetermined are the prefixes of kinds that have undetermined time, in the order of kinds.
	undetermined []string
}

func (d *pageData) ledgerSums(phase string) shareSums {
	n := len(d.Steps)
	s := shareSums{states: map[string]float64{}, stepEngine: make([]float64, n), stepGenerating: make([]float64, n)}
	eng := d.kindColumns(phase, timeKeys+engineSeconds)
	s.kinds = sortKinds(slices.Collect(maps.Keys(eng)))
	for _, prefix := range s.kinds {
		cols := map[string]values{}
		for _, st := range ledgerStates {
			cols[st] = d.kindColumns(phase, timeKeys+st+stateSeconds)[prefix]
		}
		for j, e := range eng[prefix] {
			if math.IsNaN(e) {
				continue
			}
			s.engine += e
			s.stepEngine[j] += e
			for st, col := range cols {
				if col == nil || math.IsNaN(col[j]) {
					continue
				}
				s.states[st] += col[j]
				if st == "undetermined" && col[j] > 0 && !slices.Contains(s.undetermined, prefix) {
					s.undetermined = append(s.undetermined, prefix)
				}
				if st == ledgerStates[0] {
					s.generating += col[j]
					s.stepGenerating[j] += col[j]
				}
			}
		}
	}
	return s
}

// generatingTile is the share of the engines' time that they spent generating: all
// generating engine-seconds over all engine-seconds, of every engine kind (engine-seconds add
// up across kinds), with each step's share and the largest other states; false when no step
// has the ledger.
func generatingTile(d *pageData) (tile, bool) {
	s := d.ledgerSums("")
	if !(s.engine > 0) || !isFinite(s.generating/s.engine) {
		return tile{}, false
	}
	spark := make(values, len(d.Steps))
	for j := range spark {
		spark[j] = math.NaN()
		if s.stepEngine[j] > 0 {
			spark[j] = s.stepGenerating[j] / s.stepEngine[j]
		}
	}
	var names []string
	for _, k := range s.kinds {
		names = append(names, kindName(k))
	}
	of := "all engine-seconds (" + count(math.Round(s.engine)) + "\u00a0engine-s"
	if len(s.kinds) > 1 {
		of += ", " + strings.Join(names, " and ")
	}
	t := tile{ID: "generating-share", Label: "Generating share", Value: percent(s.generating / s.engine), Sub: "generating / " + of + ")", Spark: []values{spark}, Frac: true}
	// Pages that repeated old gauges (SGLang's log points, TensorRT-LLM's last logged
	// iteration) could not tell generating from idle: the share is a lower bound by that much,
	// said first, with the kinds whose pages did.
	if u := s.states["undetermined"]; u > 0 {
		var whose []string
		for _, k := range s.undetermined {
			whose = append(whose, kindName(k)+"'s")
		}
		t.Sub += " · undetermined " + percent(u/s.engine) + " (" + strings.Join(whose, " and ") + " gauges not refreshed: generating or idle)"
	}
	// The two states that took most of the rest.
	others := slices.DeleteFunc(slices.Clone(ledgerStates[1:]), func(st string) bool { return !(s.states[st] > 0) || st == "undetermined" })
	slices.SortStableFunc(others, func(a, b string) int { return cmp.Compare(s.states[b], s.states[a]) })
	for _, st := range others[:min(2, len(others))] {
		t.Sub += " · " + strings.ReplaceAll(st, "_", " ") + " " + percent(s.states[st]/s.engine)
	}
	if r := d.ledgerSums(rolloutPhase); r.engine > 0 {
		t.Sub += " · in the rollout " + percent(r.generating/r.engine)
	}
	return t, true
}

// staleTile is the share of the generation tokens that engines generated with an older
// policy version than the trainer's: all stale tokens over all generation tokens, each engine
// kind's stale tokens over its own generation tokens (the step total, else its rate times the
// step's time), with each step's share; without generation tokens, the last step's stale
// token fraction. False when no step has the policy's stale tokens.
func staleTile(d *pageData) (tile, bool) {
	n := len(d.Steps)
	stepStale, stepGen := make([]float64, n), make([]float64, n)
	var stale, gen float64
	for prefix, col := range d.kindColumns("", policyKeys+"stale_generation_tokens") {
		tot, rate := d.kindColumns("", nameGenTokens)[prefix], d.kindColumns("", nameGenRate)[prefix]
		for j, v := range col {
			if math.IsNaN(v) {
				continue
			}
			g := math.NaN()
			switch {
			case tot != nil && !math.IsNaN(tot[j]):
				g = tot[j]
			case rate != nil && !math.IsNaN(rate[j]) && !math.IsNaN(d.Dur[j]):
				g = rate[j] * d.Dur[j]
			}
			if math.IsNaN(g) {
				continue
			}
			stale, gen = stale+v, gen+g
			stepStale[j], stepGen[j] = stepStale[j]+v, stepGen[j]+g
		}
	}
	t := tile{ID: "stale-tokens", Label: "Stale-token share", Frac: true}
	if gen > 0 && isFinite(stale/gen) {
		spark := make(values, n)
		for j := range spark {
			spark[j] = math.NaN()
			if stepGen[j] > 0 {
				spark[j] = stepStale[j] / stepGen[j]
			}
		}
		t.Value, t.Spark = percent(stale/gen), []values{spark}
		t.Sub = "stale tokens / all generation tokens (" + count(math.Round(gen)) + " tokens)"
		if v, ok := last(spark); ok {
			t.Sub += " · last step " + percent(v)
		}
		return t, true
	}
	fracs := d.kindColumns("", policyKeys+"stale_token_fraction")
	for _, prefix := range sortKinds(slices.Collect(maps.Keys(fracs))) {
		if v, ok := last(fracs[prefix]); ok {
			t.Value, t.Sub, t.Spark = percent(v), "last step", []values{fracs[prefix]}
			return t, true
		}
	}
	return tile{}, false
}
