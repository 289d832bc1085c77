package step

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
)

// ttftStep runs one step of one engine whose time_to_first_token_seconds (buckets 0.1, 0.5, 1,
// +Inf) rose by counts, cumulative, with sum.
func ttftStep(t *testing.T, counts []float64, sum float64) Record {
	t.Helper()
	zero := make([]float64, len(counts))
	recs := run(t, Options{PerWorker: true}, []event{
		scrape(0, eng{engine: "0", ttft: zero}),
		scrape(1, eng{engine: "0", ttft: counts, ttftSum: sum}),
		end(1, 1),
	})
	return recs[0]
}

const ttftKey = "vllm/time_to_first_token_seconds/"

// TestQuantileOneBucket: every one of 10 first tokens came within the first bucket (0, 0.1], at
// a mean of 0.011 s. The median cannot lie above 0.022 s (half the requests at or above it
// would make the mean at least half of it): the p50 is not the bucket's midpoint 0.05 but at
// most that, and the record gives the range each quantile is known in, since the buckets
// tell no more: p50 in [0, 0.022], p95 in [(0.011 − 0.05·0.1)/0.95, 0.1], p99 in
// [(0.011 − 0.01·0.1)/0.99, 0.1].
func TestQuantileOneBucket(t *testing.T) {
	r := ttftStep(t, []float64{10, 10, 10, 10}, 0.11)
	m := r.Metrics
	want(t, m, ttftKey+"mean", 0.011)
	want(t, m, ttftKey+"p50", 0.022)
	want(t, m, ttftKey+"p50_lo", 0)
	want(t, m, ttftKey+"p50_hi", 0.022)
	want(t, m, ttftKey+"p95", 0.095)
	want(t, m, ttftKey+"p95_lo", (0.011-0.05*0.1)/0.95)
	want(t, m, ttftKey+"p95_hi", 0.1)
	want(t, m, ttftKey+"p99", 0.099)
	want(t, m, ttftKey+"p99_lo", (0.011-0.01*0.1)/0.99)
	want(t, m, ttftKey+"p99_hi", 0.1)
	for k, v := range m {
		if _, ok := r.PerWorker[0].Metrics[k]; !ok && len(k) > len(ttftKey) && k[:len(ttftKey)] == ttftKey {
			t.Errorf("the worker's record lacks %s (%v)", k, v)
		}
	}
}

// TestQuantileMeanBounds: 9 first tokens in (0, 0.1] and one in (0.5, 1], summing 0.609 s. The
// interpolated median, 5/9 of the first bucket (0.0556), would put 4 of them at 0.0556 s or
// more and the tenth at 0.5 s or more, 0.722 s at least: the median is at most
// (0.609 − 0.5)/4. It lies in a bucket that does not hold every observation: no range is given.
func TestQuantileMeanBounds(t *testing.T) {
	m := ttftStep(t, []float64{9, 9, 10, 10}, 0.609).Metrics
	want(t, m, ttftKey+"p50", (0.609-0.5)/4)
	absent(t, m, ttftKey+"p50_lo")
	absent(t, m, ttftKey+"p50_hi")
	want(t, m, ttftKey+"p99", 0.5+0.5*0.9) // in (0.5, 1], where the mean allows it
}

// TestQuantileInfBucket: every one of 10 first tokens came after 1 s, the last finite bound, at
// a mean of 3 s. No quantile is invented above 1 s: each is 1, its range from 1 up to what the
// mean allows (half of them at 1 s or more, the rest at 1 s or more: p50 at most (30 − 5)/5).
func TestQuantileInfBucket(t *testing.T) {
	m := ttftStep(t, []float64{0, 0, 0, 10}, 30).Metrics
	for _, q := range []struct {
		stat  string
		below float64
	}{{"p50", 5}, {"p95", 9.5}, {"p99", 9.9}} {
		want(t, m, ttftKey+q.stat, 1)
		want(t, m, ttftKey+q.stat+"_lo", 1)
		want(t, m, ttftKey+q.stat+"_hi", (30-q.below)/(10-q.below))
	}
}

// TestQuantileNegativeBucketRefused: a page whose TTFT histogram has a bucket le="-1" (no first
// token comes before the request) is refused: the family gets no quantile nor mean from it, no
// quantile is negative, and the record names the target and the family, for the run's warning.
// The other worker's histogram counts as before.
func TestQuantileNegativeBucketRefused(t *testing.T) {
	pg := func(n float64) string {
		s := renderPage(eng{engine: "1", ttft: []float64{n, n, n, n}, ttftSum: n * 0.05})
		for i, le := range []string{"-1", "0.1", "+Inf"} {
			s += "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"" + le + "\",model_name=\"m\"} " + fmt.Sprint(n*float64(i)) + "\n"
		}
		s += "vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"m\"} " + fmt.Sprint(2*n) + "\n"
		s += "vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"m\"} " + fmt.Sprint(n) + "\n"
		return s
	}
	tr := NewTracker(Options{PerWorker: true})
	observeText(t, tr, 0, pg(0))
	observeText(t, tr, 1, pg(4))
	r := tr.EndStep(1, at(1))
	want(t, r.Metrics, ttftKey+"mean", 0.05)
	for _, k := range []string{"p50", "p95", "p99", "mean"} {
		absent(t, r.PerWorker[0].Metrics, ttftKey+k)
	}
	for k, v := range r.Metrics {
		if v < 0 {
			t.Errorf("%s = %v", k, v)
		}
	}
	wantRefused := []NegativeBounds{{Target: target, Engine: "0", Family: "vllm/time_to_first_token_seconds"}}
	if !reflect.DeepEqual(r.NegativeBounds, wantRefused) {
		t.Errorf("refused %+v, want %+v", r.NegativeBounds, wantRefused)
	}
}

// TestQuantileRangeHoldsTheTruth: for random samples of non-negative values (a few layouts,
// ties, values on bounds, all in one bucket, beyond the last bound), the range boundedQuantile
// gives from the buckets and the sum holds the sample's q-quantile (its ⌈q·n⌉-th smallest
// value), and so does the estimate.
func TestQuantileRangeHoldsTheTruth(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 7))
	layouts := [][]float64{{0.1, 0.5, 1}, {0, 1, 2, 5}, {100, 200}, {1, 2, 5, 10, 20, 50, 100}}
	for range 20000 {
		les := layouts[rng.IntN(len(layouts))]
		top := les[len(les)-1] * (0.5 + rng.Float64())
		n := 1 + rng.IntN(30)
		xs := make([]float64, n)
		for i := range xs {
			switch rng.IntN(4) {
			case 0:
				xs[i] = les[rng.IntN(len(les))] // on a bound
			case 1:
				xs[i] = xs[rng.IntN(i+1)] // a tie (or 0)
			default:
				xs[i] = top * rng.Float64() * rng.Float64()
			}
		}
		var bs []page.Bucket
		var sum float64
		for _, x := range xs {
			sum += x
		}
		for _, le := range append(slices.Clone(les), math.Inf(1)) {
			c := 0.0
			for _, x := range xs {
				if x <= le {
					c++
				}
			}
			bs = append(bs, page.Bucket{Le: le, Count: c})
		}
		sorted := slices.Sorted(slices.Values(xs))
		for _, q := range []float64{0.5, 0.95, 0.99} {
			truth := sorted[int(math.Ceil(q*float64(n)))-1]
			e, ok := boundedQuantile(q, bs, sum, true)
			tol := 1e-9 * math.Max(1, sum)
			if !ok || truth < e.lo-tol || truth > e.hi+tol || e.v < e.lo || e.v > e.hi {
				t.Fatalf("q %v of %v (buckets %v, sum %v): %+v (%v), truth %v", q, xs, bs, sum, e, ok, truth)
			}
		}
	}
}
