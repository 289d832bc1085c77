package step

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// percentileOf gives Percentile's value, bit for bit, on pools of every shape: random, sorted
// both ways, all equal, few distinct values, and sizes around the small-range cut-off.
func TestPercentileOfMatchesPercentile(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	shapes := map[string]func(n int) []float64{
		"random": func(n int) []float64 {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = r.NormFloat64() * 100
			}
			return xs
		},
		"ascending": func(n int) []float64 {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = float64(i) / 7
			}
			return xs
		},
		"descending": func(n int) []float64 {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = float64(n - i)
			}
			return xs
		},
		"equal": func(n int) []float64 {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = 0.25
			}
			return xs
		},
		"few values": func(n int) []float64 {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = float64(r.IntN(4))
			}
			return xs
		},
		"organ pipe": func(n int) []float64 {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = float64(min(i, n-i))
			}
			return xs
		},
	}
	sizes := []int{1, 2, 3, 15, 16, 17, 18, 33, 100, 1001, 20000}
	for name, make := range shapes {
		for _, n := range sizes {
			for _, q := range []float64{0, 0.05, 0.5, 0.95, 0.99, 1} {
				xs := make(n)
				sorted := slices.Clone(xs)
				want, _ := Percentile(sorted, q)
				got, ok := percentileOf(xs, q)
				if !ok || got != want {
					t.Fatalf("%s, n %d, q %v: percentileOf %v (ok %v), Percentile %v", name, n, q, got, ok, want)
				}
				slices.Sort(xs)
				if !slices.Equal(xs, sorted) {
					t.Fatalf("%s, n %d, q %v: percentileOf changed the pool's values, not only their order", name, n, q)
				}
			}
		}
	}
	if _, ok := percentileOf(nil, 0.95); ok {
		t.Fatal("a percentile of no samples")
	}
}

// nth puts the k-th value in place with nothing greater before it and nothing smaller after,
// for every k of a pool with repeated values.
func TestNth(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := 1; n < 300; n += 7 {
		for k := 0; k < n; k += max(1, n/9) {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = float64(r.IntN(n/3 + 1))
			}
			sorted := slices.Sorted(slices.Values(xs))
			nth(xs, k)
			if xs[k] != sorted[k] {
				t.Fatalf("n %d k %d: xs[k] %v, want %v", n, k, xs[k], sorted[k])
			}
			for i, x := range xs {
				if i < k && x > xs[k] || i > k && x < xs[k] {
					t.Fatalf("n %d k %d: xs[%d] = %v on the wrong side of %v", n, k, i, x, xs[k])
				}
			}
		}
	}
}
