package window

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// TestWorkerSeriesOrder checks that a worker's increases do not hang on the order of its page's
// series, nor on series leaving and coming back, nor on the page being one object filled anew
// from scrape to scrape as a Parser does: a worker fed pages in one order and a worker fed the
// same series shuffled, on one reused page, give the same increases. Values are integers, so
// that sums in another order are equal.
func TestWorkerSeriesOrder(t *testing.T) {
	type ctr struct {
		fam         vllm.Counter
		key, reason string
		v           float64
	}
	type hist struct {
		key     string
		buckets []float64 // cumulative counts at 0.1, 1, +Inf
		sum     float64
	}
	for seed := range 50 {
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		ctrs := []ctr{
			{fam: vllm.PromptTokens, key: `model_name="a"`},
			{fam: vllm.PromptTokens, key: `model_name="b"`},
			{fam: vllm.RequestSuccess, key: `finished_reason="stop",model_name="a"`, reason: "stop"},
			{fam: vllm.RequestSuccess, key: `finished_reason="length",model_name="a"`, reason: "length"},
			{fam: vllm.RequestSuccess, key: `finished_reason="stop",model_name="b"`, reason: "stop"},
			{fam: vllm.Preemptions, key: ""},
		}
		hists := []hist{{key: `model_name="a"`, buckets: make([]float64, 3)}, {key: `model_name="b"`, buckets: make([]float64, 3)}}
		ordered, shuffled := NewWorker(), NewWorker()
		reused := &page.EnginePage{}
		for scrape := range 40 {
			for i := range ctrs {
				switch r := rng.IntN(20); {
				case r == 0:
					ctrs[i].v = float64(rng.IntN(5)) // a restart
				case r == 1:
					ctrs[i].v = math.NaN()
				default:
					if math.IsNaN(ctrs[i].v) {
						ctrs[i].v = 0
					}
					ctrs[i].v += float64(rng.IntN(10))
				}
			}
			for i := range hists {
				h := &hists[i]
				if rng.IntN(20) == 0 {
					clear(h.buckets)
					h.sum = 0
				}
				n := 0.0
				for j := range h.buckets {
					n += float64(rng.IntN(4))
					h.buckets[j] += n
				}
				h.sum += float64(rng.IntN(100))
			}
			var ep page.EnginePage
			for _, c := range ctrs {
				if rng.IntN(8) == 0 { // the series is not on this page
					continue
				}
				ep.Counters = append(ep.Counters, page.CounterSeries{Family: c.fam, Key: c.key, Reason: c.reason, Value: c.v})
			}
			for _, h := range hists {
				if rng.IntN(8) == 0 {
					continue
				}
				bs := []page.Bucket{{Le: 0.1, Count: h.buckets[0]}, {Le: 1, Count: h.buckets[1]}, {Le: math.Inf(1), Count: h.buckets[2]}}
				ep.Hists = append(ep.Hists, page.HistSeries{Family: vllm.TTFT, Key: h.key, Buckets: bs, Sum: h.sum, Count: h.buckets[2], HasSum: true})
			}
			// The same series on one reused page, shuffled on every other scrape.
			reused.Counters = append(reused.Counters[:0], ep.Counters...)
			reused.Hists = slices.Grow(reused.Hists[:0], len(ep.Hists))[:len(ep.Hists)]
			for i, hs := range ep.Hists {
				bs := append(reused.Hists[i].Buckets[:0], hs.Buckets...)
				reused.Hists[i] = hs
				reused.Hists[i].Buckets = bs
			}
			if scrape%2 == 1 {
				rng.Shuffle(len(reused.Counters), func(i, j int) { reused.Counters[i], reused.Counters[j] = reused.Counters[j], reused.Counters[i] })
				rng.Shuffle(len(reused.Hists), func(i, j int) { reused.Hists[i], reused.Hists[j] = reused.Hists[j], reused.Hists[i] })
			}
			want := ordered.Observe(&ep, 0)
			got := shuffled.Observe(reused, 0)
			if got.Counters != want.Counters || got.HasCounter != want.HasCounter {
				t.Fatalf("seed %d scrape %d: counters %v %v, want %v %v", seed, scrape, got.Counters, got.HasCounter, want.Counters, want.HasCounter)
			}
			for c := range want.Shares {
				if g, w := shareMap(got.Shares[c]), shareMap(want.Shares[c]); !maps.Equal(g, w) {
					t.Fatalf("seed %d scrape %d: %s shares %v, want %v", seed, scrape, vllm.Counters[c].Name, g, w)
				}
			}
			if !maps.Equal(got.Success(), want.Success()) {
				t.Fatalf("seed %d scrape %d: success %v, want %v", seed, scrape, got.Success(), want.Success())
			}
			if g, w := fmtDelta(got.Hists[vllm.TTFT]), fmtDelta(want.Hists[vllm.TTFT]); g != w {
				t.Fatalf("seed %d scrape %d: ttft %s, want %s", seed, scrape, g, w)
			}
			// What the worker keeps must not be the page's: scribble over it.
			for i := range reused.Hists {
				for j := range reused.Hists[i].Buckets {
					reused.Hists[i].Buckets[j].Count = -1
				}
			}
		}
	}
}

// shareMap is a family's shares by label value; each value must come once.
func shareMap(sh []Share) map[string]float64 {
	m := map[string]float64{}
	for _, s := range sh {
		m[s.Value] += s.Inc
	}
	if len(m) != len(sh) {
		panic("a label value in two shares: " + slices.Collect(maps.Keys(m))[0])
	}
	return m
}
