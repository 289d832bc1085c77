package report

import (
	"slices"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The Requests group charts the shape of the step's requests: their lengths' quantiles, the
// truncated share and the aborted requests' prompt tokens (which the spec groups there), and
// the prefill split, the step's prompt tokens by where their KV came from, as one bar per step
// stacked by source.

// chartSplit is the kind of the prefill split's chart: the page draws it as the ledger's
// stacked bars (of tokens rather than engine-seconds).
const chartSplit = "split"

// splitID is the prefill split chart's id.
const splitID = "prompt_tokens_by_source"

// splitParts are the prefill split's keys (without prefix) and their layers' names, bottom up:
// the tokens computed, then those the local prefix cache and a KV connector saved.
var splitParts = []struct{ name, line string }{
	{"prompt_tokens_computed", "computed"},
	{"prompt_tokens_cached", "cached"},
	{"prompt_tokens_transferred", "transferred"},
}

// placeSplit gives the prefill split's chart of a key v (without prefix) that is a part of it,
// and the key's layer there; false for any other key.
func placeSplit(v vllm.Value) (placed, string, bool) {
	i := slices.IndexFunc(splitParts, func(p struct{ name, line string }) bool { return p.name == v.Name })
	if i < 0 || v.Stat != "" || v.Label != "" {
		return placed{}, "", false
	}
	return placed{
		chart: chart{ID: splitID, Title: "Prefill split", Unit: "prompt tokens per step, by source", Kind: chartSplit},
		group: vllm.GroupRequests,
		rank:  rankOf(vllm.Value{Name: splitParts[0].name}),
	}, splitParts[i].line, true
}

// splitRank orders the split's layers as splitParts lists them; -1 for another line.
func splitRank(line string) int {
	return slices.IndexFunc(splitParts, func(p struct{ name, line string }) bool { return p.line == line })
}

// mfuTile is the headline's MFU: the steps' MFU weighted by their seconds (all the engines'
// FLOPs over all the steps' time, as a share of the GPU's peak, where every step has the same
// engines), with the last step's, the rollout's and the achieved TFLOP/s per GPU beside it;
// false when no step has the key.
func mfuTile(d *pageData) (tile, bool) {
	col := d.column(step.NameMFU)
	v, ok := d.throughput("", step.NameMFU, "")
	if col == nil || !ok {
		return tile{}, false
	}
	t := tile{ID: "mfu", Label: "MFU", Value: percent(v), Sub: "achieved / peak TFLOP/s over all steps' time", Spark: []values{col}, Frac: true}
	if tf, ok := d.throughput("", step.NameTFLOPS, ""); ok {
		t.Sub += " (" + sig(tf) + "\u00a0TFLOP/s per GPU)"
	}
	if l, ok := last(col); ok {
		t.Sub += " · last step " + percent(l)
	}
	if r, ok := d.throughput("", step.NameMFU, rolloutPhase); ok {
		t.Sub += " · in the rollout " + percent(r)
	}
	return t, true
}
