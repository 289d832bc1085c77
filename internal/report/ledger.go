package report

import (
	"cmp"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The engine time ledger's keys (after an engine kind's prefix): each state's engine-seconds
// in the step, time/<state>_s, their sum time/engine_s, and each state's share of it,
// time/<state>_fraction; the same keys in each phase.
const (
	timeKeys      = "time/"
	engineSeconds = "engine_s"
	stateSeconds  = "_s"
	stateFraction = "_fraction"
)

// ledgerStates are the ledger's states in the order the report stacks them, bottom up, and
// lists them: the engines' useful time first, then the ways it was spent otherwise. A state
// the report does not know comes after them, by name.
var ledgerStates = []string{"generating", "idle", "asleep", "waking", "paused", "loading_weights", "unreachable", "undetermined"}

// policyKeys are the policy keys (after an engine kind's prefix) that the report charts.
const policyKeys = "policy/"

// groupPolicy is the report's group of the policy charts, after the throughput.
const groupPolicy = "Policy"

// pageGroups are the report's groups in page order: package vllm's, with the policy after
// the throughput.
var pageGroups = func() []string {
	i := slices.Index(vllm.Groups, vllm.GroupThroughput) + 1
	return slices.Insert(slices.Clone(vllm.Groups), i, groupPolicy)
}()

// The kinds of chart the page draws other than lines of a key's statistics: the ledger's
// engine-seconds stacked by state, and lines of the states' fractions in the states' colours.
const (
	chartStack  = "stack"
	chartStates = "states"
)

// policyChart is a chart of policy keys: its id, title and unit, whether its values are
// fractions.
type policyChart struct {
	id, title, unit string
	frac            bool
}

// policyCharts are the policy group's charts by id, in page order. The trainer's version and
// the engines' lowest and highest share a chart: how far the engines trail the trainer.
// Versions are the trainer's numbers, which engines report as a decimal integer or not at all.
var policyCharts = []policyChart{
	{"policy/version", "Policy version", "version", false},
	{"policy/publish_lag_s", "Policy publish lag", "seconds", false},
	{"policy/engines_behind", "Engines behind the trainer", "engines", false},
	{"policy/stale_token_fraction", "Stale token fraction", "stale / all generation tokens (0–1)", true},
	{"policy/stale_generation_tokens", "Stale generation tokens", "tokens per step", false},
}

// policyLines place the policy keys, by their name after policyKeys: the chart id and the
// key's line there. A policy key not listed is a chart of its own.
var policyLines = map[string][2]string{
	"version":                 {"policy/version", "trainer"},
	"engine_version_min":      {"policy/version", "engines' min"},
	"engine_version_max":      {"policy/version", "engines' max"},
	"publish_lag_s/mean":      {"policy/publish_lag_s", "mean"},
	"publish_lag_s/max":       {"policy/publish_lag_s", "max"},
	"engines_behind":          {"policy/engines_behind", "step"},
	"stale_token_fraction":    {"policy/stale_token_fraction", "step"},
	"stale_generation_tokens": {"policy/stale_generation_tokens", "step"},
}

// placed is a chart being assembled by groupKeys, with its group and its place in it.
type placed struct {
	chart
	group string
	rank  int
}

// ledgerPlacer places the time ledger's and the policy's keys, which are charted per engine
// kind: a kind's keys are its own workers', and a fleet of two kinds gets the charts twice,
// each titled with its kind. Engine-seconds of two kinds are not summed into one chart: each
// stacked bar is then a real key of the record, and an idle kind does not hide behind a busy one.
type ledgerPlacer struct {
	// kinds are the prefixes that have ledger or policy keys, vLLM's first.
	kinds []string
	// ledger holds the prefixes with time/engine_s: only they get the stacked chart, and a
	// run without the key none.
	ledger map[string]bool
}

// splitKind finds part ("time/", "policy/") in key, at its start or at its last place after a
// "/": the prefix of the key's engine kind before it and what follows it.
func splitKind(key, part string) (prefix, rest string, ok bool) {
	if r, ok := strings.CutPrefix(key, part); ok {
		return "", r, true
	}
	i := strings.LastIndex(key, "/"+part)
	if i < 0 {
		return "", "", false
	}
	return key[:i], key[i+1+len(part):], true
}

func newLedgerPlacer(keys []string) *ledgerPlacer {
	p := &ledgerPlacer{ledger: map[string]bool{}}
	for _, k := range keys {
		if prefix, rest, ok := splitKind(k, timeKeys); ok && rest == engineSeconds {
			p.ledger[prefix] = true
		}
	}
	seen := map[string]bool{}
	for _, k := range keys {
		prefix, _, ok := splitKind(k, timeKeys)
		if ok && !p.ledger[prefix] {
			ok = false
		}
		if !ok {
			prefix, _, ok = splitKind(k, policyKeys)
		}
		if ok && !seen[prefix] {
			seen[prefix] = true
			p.kinds = append(p.kinds, prefix)
		}
	}
	sortKinds(p.kinds)
	return p
}

// sortKinds orders engine kinds' prefixes: vLLM's (last part "vllm") first, then by name.
func sortKinds(kinds []string) []string {
	isVLLM := func(p string) bool { return p == vllm.Prefix || strings.HasSuffix(p, "/"+vllm.Prefix) }
	slices.SortFunc(kinds, func(a, b string) int {
		if va, vb := isVLLM(a), isVLLM(b); va != vb {
			if va {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return kinds
}

// kindName names a kind's prefix in titles: the engine's name for a known one.
func kindName(prefix string) string {
	last := prefix[strings.LastIndexByte(prefix, '/')+1:]
	for _, e := range vllm.Engines {
		if e.Prefix == last {
			return e.Name
		}
	}
	return prefix
}

// place gives the chart of key (of the whole step, with prefix), false when it is no ledger
// or policy key. A kind after the first gets its own charts: their id starts with its prefix,
// their title ends with its name.
func (p *ledgerPlacer) place(key string) (placed, string, bool) {
	var c placed
	var line string
	prefix, rest, ok := splitKind(key, timeKeys)
	if ok && p.ledger[prefix] {
		state, isSeconds := strings.CutSuffix(rest, stateSeconds)
		if !isSeconds {
			var isFrac bool
			if state, isFrac = strings.CutSuffix(rest, stateFraction); !isFrac {
				return placed{}, "", false
			}
		}
		c.group = vllm.GroupBalance
		if isSeconds {
			c.ID, c.Title, c.Unit, c.Kind = timeKeys+"<state>"+stateSeconds, "Where the step went", "engine-seconds by state", chartStack
			line = state
			if rest == engineSeconds {
				line = "total"
			}
		} else {
			c.ID, c.Title, c.Unit, c.Kind = timeKeys+"<state>"+stateFraction, "Engine time by state", "fraction of the engine-seconds (0–1)", chartStates
			c.Frac = true
			line = state
		}
	} else if prefix, rest, ok = splitKind(key, policyKeys); ok {
		c.group = groupPolicy
		c.ID, line = policyKeys+rest, "step"
		if l, known := policyLines[rest]; known {
			c.ID, line = l[0], l[1]
		}
		c.Title, c.rank = c.ID, len(policyCharts)
		if i := slices.IndexFunc(policyCharts, func(x policyChart) bool { return x.id == c.ID }); i >= 0 {
			c.Title, c.Unit, c.Frac, c.rank = policyCharts[i].title, policyCharts[i].unit, policyCharts[i].frac, i
		}
	} else {
		return placed{}, "", false
	}
	k := slices.Index(p.kinds, prefix)
	if c.group == vllm.GroupBalance {
		// Before the fleet-balance charts, a kind's two together.
		c.rank = -1000 + 2*k
		if c.Kind == chartStates {
			c.rank++
		}
	} else {
		c.rank += 100 * k
	}
	if k > 0 {
		c.ID = prefix + "/" + c.ID
	}
	if len(p.kinds) > 1 {
		c.Title += " · " + kindName(prefix)
	}
	return c, line, true
}

// lineRank orders the named lines of a chart: the ledger's states in ledgerStates' order, the
// policy's lines in policyLineOrder's, other names after them, the ledger's total last.
func lineRank(line string) int {
	if i := slices.Index(ledgerStates, line); i >= 0 {
		return i
	}
	if i := slices.Index(policyLineOrder, line); i >= 0 {
		return 100 + i
	}
	if i := splitRank(line); i >= 0 {
		return 200 + i
	}
	if line == "total" {
		return 1000
	}
	return 500
}

// policyLineOrder orders the policy's lines: the trainer's version after the engines', over them.
var policyLineOrder = []string{"engines' min", "engines' max", "trainer", "mean", "max", "step"}

// sortLines orders the keys of a chart with named lines: the whole step's (a key's first
// spelling) before each phase's, as in every chart, and within each by lineRank, then name.
func sortLines(c *chart, of []string) {
	seen := map[string]int{}
	occ := make(map[int]int, len(c.Keys))
	for _, k := range c.Keys {
		occ[k] = seen[of[k]]
		seen[of[k]]++
	}
	slices.SortStableFunc(c.Keys, func(a, b int) int {
		na, nb := c.Names[of[a]], c.Names[of[b]]
		return cmp.Or(cmp.Compare(occ[a], occ[b]), cmp.Compare(lineRank(na), lineRank(nb)), strings.Compare(na, nb))
	})
}
