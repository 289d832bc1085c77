package fleetmodel

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// batchShares runs cfg's GRPO batches to the end and returns, per batch, each engine's
// generation tokens and the simulated time its last iteration ended, engines server by server,
// with the batches' own end times.
func batchShares(t *testing.T, cfg fleetconfig.Config) (tokens [][]int64, lastBusy [][]time.Duration, done []BatchDone) {
	t.Helper()
	s := mustSim(t, cfg)
	prev := make([]int64, len(s.Engines))
	for at := 50 * time.Millisecond; len(done) < cfg.Workload.Batches; at += 50 * time.Millisecond {
		if at > 10*time.Minute {
			t.Fatalf("only %d of %d batches in 10 simulated minutes", len(done), cfg.Workload.Batches)
		}
		s.AdvanceTo(at)
		bs := s.TakeBatches()
		if len(bs) == 0 {
			continue
		}
		if len(bs) > 1 {
			t.Fatalf("batches %v ended within one 50 ms advance: the pause is too short to tell them apart", bs)
		}
		toks := make([]int64, len(s.Engines))
		ends := make([]time.Duration, len(s.Engines))
		for i, e := range s.Engines {
			toks[i] = e.Stats.GenerationTokens - prev[i]
			prev[i] = e.Stats.GenerationTokens
			ends[i] = e.LastBusy
		}
		tokens = append(tokens, toks)
		lastBusy = append(lastBusy, ends)
		done = append(done, bs...)
	}
	return tokens, lastBusy, done
}

// demoLikeConfig is the fleet `vllmstat demo` runs: 2 servers × 2 engines, its smaller KV
// cache and shorter pause.
func demoLikeConfig(straggler float64) fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.DP = 2
	cfg.BlocksPerEngine = 640
	cfg.Workload.Pause = time.Second
	cfg.Workload.Batches = 3
	cfg.Workload.Straggler = straggler
	return cfg
}

// TestStragglerEngine checks that --straggler 4 makes the last engine of the last server
// generate about four times the tokens of each other engine in every batch, and finish every
// batch last; without it, no engine stands out that much.
func TestStragglerEngine(t *testing.T) {
	for _, f := range []float64{1, 4} {
		t.Run(fmt.Sprint("factor ", f), func(t *testing.T) {
			cfg := demoLikeConfig(f)
			tokens, lastBusy, done := batchShares(t, cfg)
			slow := len(tokens[0]) - 1
			var slowSum, othersSum float64
			for b := range tokens {
				others := 0.0
				for i, n := range tokens[b][:slow] {
					others += float64(n)
					if n == 0 {
						t.Errorf("batch %d: engine %d generated nothing", done[b].N, i)
					}
				}
				others /= float64(slow)
				ratio := float64(tokens[b][slow]) / others
				t.Logf("factor %g batch %d: generation tokens per engine %v (slow/others %.2f), last busy %v, batch done at %v",
					f, done[b].N, tokens[b], ratio, lastBusy[b], done[b].At)
				slowSum += float64(tokens[b][slow])
				othersSum += others
				if f > 1 {
					if ratio < 2.5 || ratio > 6 {
						t.Errorf("batch %d: the straggler generated %.2f times the others' tokens, want about %g", done[b].N, ratio, f)
					}
					if end := lastBusy[b][slow]; end != done[b].At || slices.Max(lastBusy[b][:slow]) >= end {
						t.Errorf("batch %d: the straggler was last busy at %v, the others at %v, the batch ended at %v: want the straggler last",
							done[b].N, end, lastBusy[b][:slow], done[b].At)
					}
				}
			}
			ratio := slowSum / othersSum
			if f > 1 && math.Abs(ratio-f) > 0.25*f {
				t.Errorf("over %d batches the straggler generated %.2f times the others' tokens, want %g ± 25%%", len(done), ratio, f)
			}
			if f == 1 && (ratio < 0.6 || ratio > 1.6) {
				t.Errorf("without a straggler the last engine generated %.2f times the others' tokens", ratio)
			}
		})
	}
}

// TestStragglerLeavesOtherRequestsAlone checks that only the straggler's requests change, and
// they by the factor: every request draws its length from the same numbers either way.
func TestStragglerLeavesOtherRequestsAlone(t *testing.T) {
	cfg := fleetconfig.DefaultConfig()
	cfg.Workload.MaxTokens = 4096 // no cut, so that the lengths scale exactly
	cfg.Workload.OutputSigma = 0.3
	cfg.MaxModelLen = 65536
	cfg.BlocksPerEngine = 65536 / snap.BlockSize
	plain := workload.NewGenerator(cfg.Workload, 4, cfg.MaxModelLen, 7).Batch(1, 0)
	cfg.Workload.Straggler = 3
	stretched := workload.NewGenerator(cfg.Workload, 4, cfg.MaxModelLen, 7).Batch(1, 0)
	slowSeen := 0
	for i, a := range plain {
		b := stretched[i]
		if a.Engine != b.Engine {
			t.Fatalf("request %d routed to engine %d, with a straggler to %d", i, a.Engine, b.Engine)
		}
		if a.Engine != 3 {
			if a.Spec != b.Spec {
				t.Fatalf("request %d on engine %d changed: %+v became %+v", i, a.Engine, a.Spec, b.Spec)
			}
			continue
		}
		slowSeen++
		// round(3·l) is within 1.5 of 3·round(l).
		if d := math.Abs(float64(b.Spec.OutputLen - 3*a.Spec.OutputLen)); d > 1.5 || b.Spec.MaxTokens != 3*a.Spec.MaxTokens {
			t.Errorf("straggler request %d: output %d and max tokens %d, without the straggler %d and %d",
				i, b.Spec.OutputLen, b.Spec.MaxTokens, a.Spec.OutputLen, a.Spec.MaxTokens)
		}
	}
	if slowSeen == 0 {
		t.Fatal("no request went to the straggler")
	}
}

// TestStragglerRequestsFitTheModel checks the cut: a straggler's prompt plus output never
// exceeds the model length, and requests cut there finish with reason "length".
func TestStragglerRequestsFitTheModel(t *testing.T) {
	cfg := fleetconfig.DefaultConfig()
	cfg.Workload.Straggler = 8
	g := workload.NewGenerator(cfg.Workload, 2, cfg.MaxModelLen, 1)
	cut := 0
	for n := 1; n <= 20; n++ {
		for _, rs := range g.Batch(n, 0) {
			s := rs.Spec
			if s.PromptLen+s.MaxTokens > cfg.MaxModelLen || s.OutputLen > s.MaxTokens {
				t.Fatalf("request %d: prompt %d, output %d, max tokens %d, model length %d", s.ID, s.PromptLen, s.OutputLen, s.MaxTokens, cfg.MaxModelLen)
			}
			if rs.Engine == 1 && s.OutputLen == s.MaxTokens {
				cut++
			}
		}
	}
	if cut == 0 {
		t.Error("no straggler request reached the model length at factor 8")
	}
}

func TestStragglerSameSeedSameEvents(t *testing.T) {
	for _, kind := range []string{workload.WorkloadGRPO, workload.WorkloadPoisson} {
		t.Run(kind, func(t *testing.T) {
			cfg := fleetconfig.DefaultConfig()
			cfg.DP = 2
			cfg.Workload.Kind = kind
			cfg.Workload.Straggler = 4
			a := eventLog(t, cfg, 15*time.Second, 15*time.Second)
			if b := eventLog(t, cfg, 15*time.Second, 15*time.Second); !slices.Equal(a, b) {
				t.Fatal("same seed and straggler, different events")
			}
			cfg.Workload.Straggler = 1
			if c := eventLog(t, cfg, 15*time.Second, 15*time.Second); slices.Equal(a, c) {
				t.Fatal("the straggler changed no event")
			}
		})
	}
}

func TestStragglerValidation(t *testing.T) {
	for _, f := range []float64{0, 0.5, -2, math.NaN(), math.Inf(1)} {
		cfg := fleetconfig.DefaultConfig()
		cfg.Workload.Straggler = f
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "straggler factor must be a number of at least 1") {
			t.Errorf("straggler %v: got %v", f, err)
		}
	}
	cfg := fleetconfig.DefaultConfig()
	cfg.Workload.Straggler = 1.5
	if err := cfg.Validate(); err != nil {
		t.Errorf("straggler 1.5: %v", err)
	}
}
