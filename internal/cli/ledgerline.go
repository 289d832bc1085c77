package cli

import (
	"fmt"
	"strings"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// ledgerNames are the states' short names on a ledger line, in the ledger's order.
var ledgerNames = [step.NumStates]string{
	step.Generating:     "gen",
	step.Idle:           "idle",
	step.Asleep:         "asleep",
	step.Waking:         "waking",
	step.Paused:         "paused",
	step.LoadingWeights: "load",
	step.Unreachable:    "unreachable",
	step.Undetermined:   "undetermined",
}

// ledgerLine says where the engine-seconds of a step (or phase) of kind's workers went, from
// its metrics m under prefix: "time gen 62% idle 8% asleep 21% waking 3% load 6%", the states
// with time only, in the ledger's order; a state with less than half a percent shows as "<1%".
// It is "" when the metrics have no engine time.
func ledgerLine(m map[string]float64, prefix string, kind vllm.Engine) string {
	key := func(name string) string { return vllm.Value{Name: name, Kind: kind}.Key(prefix) }
	if !(m[key(step.NameEngineTime)] > 0) {
		return ""
	}
	var b strings.Builder
	b.WriteString("time")
	for s, name := range ledgerNames {
		f := m[key(step.FractionKey(step.State(s)))]
		switch {
		case !(f > 0):
			continue
		case f < 0.005:
			fmt.Fprintf(&b, " %s <1%%", name)
		default:
			fmt.Fprintf(&b, " %s %.0f%%", name, f*100)
		}
	}
	return b.String()
}
