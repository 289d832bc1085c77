package report

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
)

// splitTokens are the prefill split of step n: computed, cached and transferred prompt tokens.
func splitTokens(n int64) [3]float64 {
	transferred := 500.0
	if n == 1 {
		transferred = 0 // no KV connector hits yet
	}
	return [3]float64{1000 + 100*float64(n), 3000, transferred}
}

// addRequests gives r the request shape keys: the lengths' quantiles, the truncated share, the
// prompt tokens of aborted requests, the prefill split, and the compute keys with MFU, the rollout phase's too.
func addRequests(r *step.Record) {
	m, n := r.Metrics, float64(r.Step)
	for _, f := range []string{"request_prompt_tokens", "request_generation_tokens"} {
		m["vllm/"+f+"/p50"], m["vllm/"+f+"/p95"], m["vllm/"+f+"/p99"], m["vllm/"+f+"/mean"] = 300+n, 900+n, 990, 400
	}
	m["vllm/finished_requests"] = 256
	m["vllm/truncated_fraction"] = 0.1 + 0.01*n
	m["vllm/aborted_prompt_tokens"] = 0
	if r.Step == 3 {
		m["vllm/aborted_prompt_tokens"] = 612 // a step with an abort; a key 0 in every step folds away
	}
	s := splitTokens(r.Step)
	m["vllm/prompt_tokens_computed"], m["vllm/prompt_tokens_cached"], m["vllm/prompt_tokens_transferred"] = s[0], s[1], s[2]
	m["vllm/achieved_tflops_per_gpu"] = 100 + 10*n
	m["vllm/mfu"] = (100 + 10*n) / 989
	if p := r.Phases[rolloutPhase]; p != nil {
		p.Metrics["vllm/mfu"] = 2 * m["vllm/mfu"]
		p.Metrics["vllm/prompt_tokens_computed"] = s[0]
	}
}

// requestsRun is a run of steps with phases and the request shape keys.
func requestsRun(steps int) []*step.Record {
	var recs []*step.Record
	for n := range int64(steps) {
		r := testStep(n+1, 2, 20)
		addTestPhases(r)
		addRequests(r)
		recs = append(recs, r)
	}
	return recs
}

// TestRequestsGroup: the Requests group holds the length quantiles, the truncated share, the
// aborted requests' prompt tokens and the prefill split, one stacked chart whose layers are the split's sources bottom
// up, the rollout's computed tokens after them; MFU is charted with the throughput.
func TestRequestsGroup(t *testing.T) {
	d := buildOf(t, requestsRun(4))
	var requests []string
	for _, g := range d.Groups {
		if g.Name == "Requests" {
			for _, c := range g.Charts {
				requests = append(requests, c.ID)
			}
		}
	}
	for _, id := range []string{"request_prompt_tokens", "request_generation_tokens", "truncated_fraction", "aborted_prompt_tokens", splitID} {
		if !slices.Contains(requests, id) {
			t.Errorf("Requests group %q lacks %s", requests, id)
		}
	}
	c, _ := chartWith(d, splitID)
	if c == nil {
		t.Fatal("no prefill split chart")
	}
	if c.Kind != chartSplit || c.Title != "Prefill split" || !strings.Contains(c.Unit, "tokens") {
		t.Errorf("split chart %+v", c)
	}
	if got, want := linesOf(d, c), []string{"computed", "cached", "transferred", "rollout computed"}; !slices.Equal(got, want) {
		t.Errorf("split lines %q, want %q", got, want)
	}
	for _, id := range []string{"prompt_tokens_computed", "prompt_tokens_cached", "prompt_tokens_transferred"} {
		if c, _ := chartWith(d, id); c != nil {
			t.Errorf("%s has a chart of its own beside the split", id)
		}
	}
	for _, id := range []string{step.NameMFU, step.NameTFLOPS} {
		if _, g := chartWith(d, id); g != "Throughput" {
			t.Errorf("%s charted in %q, want Throughput", id, g)
		}
	}
}

// TestMFUTile: the headline's MFU is the steps' weighted by their seconds, with the last step's
// and the rollout's beside it; a run without the key has no tile.
func TestMFUTile(t *testing.T) {
	recs := requestsRun(4)
	d := buildOf(t, recs)
	var mfu *tile
	for i, tl := range d.Headline {
		if tl.ID == "mfu" {
			mfu = &d.Headline[i]
		}
	}
	if mfu == nil {
		t.Fatalf("no MFU tile in %+v", d.Headline)
	}
	var sum, secs, rsum, rsecs float64
	for _, r := range recs {
		sum += r.Metrics["vllm/mfu"] * r.DurationS
		secs += r.DurationS
		if p := r.Phases[rolloutPhase]; p != nil {
			rsum += p.Metrics["vllm/mfu"] * p.DurationS
			rsecs += p.DurationS
		}
	}
	if want := percent(sum / secs); mfu.Value != want {
		t.Errorf("MFU tile %q, want %q", mfu.Value, want)
	}
	for _, part := range []string{"last step " + percent(recs[3].Metrics["vllm/mfu"]), "in the rollout " + percent(rsum/rsecs), "TFLOP/s per GPU"} {
		if !strings.Contains(mfu.Sub, part) {
			t.Errorf("MFU tile says %q, want %q in it", mfu.Sub, part)
		}
	}
	if !mfu.Frac || len(mfu.Spark) != 1 || math.Abs(mfu.Spark[0][0]-recs[0].Metrics["vllm/mfu"]) > 1e-12 {
		t.Errorf("MFU tile's line %v (frac %v)", mfu.Spark, mfu.Frac)
	}
	plain := buildOf(t, ledgerRun(3, 2))
	for _, tl := range plain.Headline {
		if tl.ID == "mfu" {
			t.Errorf("a run without MFU has the tile %+v", tl)
		}
	}
}
