package vllmpage

import (
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// With speculative decoding on, a page's spec_decode counters agree with each other and with
// the tokens generated, requests still get exactly their output length, and decoding is faster
// per generated token than without drafts.
func TestSpecDecode(t *testing.T) {
	run := func(k int) (*fleetmodel.Sim, map[string]float64) {
		cfg := fleetconfig.DefaultConfig()
		cfg.DP = 2
		cfg.SpecDecode = k
		cfg.Workload.Batches = 2
		s := mustSim(t, cfg)
		s.AdvanceTo(40 * time.Second)
		return s, simtest.TotalsFromPages(t, len(s.Servers), s.Page)
	}
	off, offTot := run(0)
	for i := range off.Servers {
		if p := string(off.Page(i, simtest.Start)); strings.Contains(p, "spec_decode") {
			t.Fatal("a page without speculative decoding has spec_decode families")
		}
	}
	const k = 3
	s, tot := run(k)
	drafts, draftTokens, accepted := tot["spec_decode_num_drafts"], tot["spec_decode_num_draft_tokens"], tot["spec_decode_num_accepted_tokens"]
	if drafts == 0 {
		t.Fatal("no drafts")
	}
	if draftTokens > k*drafts || draftTokens < drafts || accepted > draftTokens {
		t.Errorf("drafts %v, draft tokens %v, accepted %v: want drafts <= draft tokens <= %d*drafts, accepted <= draft tokens", drafts, draftTokens, accepted, k)
	}
	if r := accepted / draftTokens; r < 0.3 || r > 0.95 {
		t.Errorf("acceptance rate %v, want between the model's bounds", r)
	}
	// Per position: the sum is the accepted total, and a later position is never accepted more
	// often than an earlier one (a draft stops at its first rejection).
	var sum, prev float64
	for i := range k {
		v, ok := perPos(t, s, i)
		if !ok {
			t.Fatalf("no accepted tokens series for position %d", i)
		}
		if i > 0 && v > prev {
			t.Errorf("position %d accepted %v times, more than position %d (%v)", i, v, i-1, prev)
		}
		sum, prev = sum+v, v
	}
	if sum != accepted {
		t.Errorf("accepted by position add up to %v, total %v", sum, accepted)
	}
	// The same requests produce the same tokens, in fewer iterations.
	for _, key := range []string{"generation_tokens", "request_success/stop", "request_success/length", "request_generation_tokens_sum"} {
		if tot[key] != offTot[key] {
			t.Errorf("%s: %v with speculative decoding, %v without", key, tot[key], offTot[key])
		}
	}
	// One inter-token latency per decode iteration: fewer than generated tokens by the accepted
	// drafts.
	if got, want := tot["inter_token_latency_seconds_count"], offTot["inter_token_latency_seconds_count"]-accepted; got != want {
		t.Errorf("%v inter-token latencies, want %v (the run without drafts less the accepted tokens)", got, want)
	}
	if s.Time != off.Time {
		t.Fatalf("runs advanced to different times")
	}
}

// perPos sums position i of spec_decode_num_accepted_tokens_per_pos over every page.
func perPos(t *testing.T, s *fleetmodel.Sim, i int) (float64, bool) {
	var v float64
	found := false
	for srv := range s.Servers {
		f := simtest.ParsePage(t, s.Page(srv, simtest.Start))["vllm:spec_decode_num_accepted_tokens_per_pos_total"]
		if f == nil {
			continue
		}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "position" && l.GetValue() == string(rune('0'+i)) {
					v += m.Counter.GetValue()
					found = true
				}
			}
		}
	}
	return v, found
}
