package window

import (
	"math"
	"slices"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// hist is one TTFT series with cumulative counts n, 2n, ... at the bounds les.
func hist(key string, les []float64, n float64) page.HistSeries {
	hs := page.HistSeries{Family: vllm.TTFT, Key: key, HasSum: true}
	for i, le := range les {
		hs.Buckets = append(hs.Buckets, page.Bucket{Le: le, Count: n * float64(i+1)})
	}
	hs.Count, hs.Sum = hs.Buckets[len(les)-1].Count, n
	return hs
}

// checkBounds fails unless every histogram increase of inc has Bounds equal to its buckets'
// upper bounds.
func checkBounds(t *testing.T, inc Increase) {
	t.Helper()
	for f, d := range inc.Hists {
		if d == nil {
			continue
		}
		les := make([]float64, len(d.Buckets))
		for i, b := range d.Buckets {
			les[i] = b.Le
		}
		if !slices.Equal(d.Bounds, les) {
			t.Fatalf("histogram %d: Bounds %v, buckets' bounds %v", f, d.Bounds, les)
		}
	}
}

// TestBoundsShared checks that the workers of one scratch keep one slice of bounds per layout,
// that every increase says its buckets' bounds (a layout change and a family whose series have
// two layouts among them), and that layouts past the table's bound still get theirs.
func TestBoundsShared(t *testing.T) {
	a := []float64{0.1, 1, math.Inf(1)}
	b := []float64{0.5, 1, 2, math.Inf(1)}
	var s Scratch
	w1, w2 := NewWorkerSharing(&s), NewWorkerSharing(&s)
	for k := 1.0; k <= 3; k++ {
		checkBounds(t, w1.Observe(&page.EnginePage{Hists: []page.HistSeries{hist("", a, k)}}, 0))
		checkBounds(t, w2.Observe(&page.EnginePage{Hists: []page.HistSeries{hist("", a, k)}}, 0))
	}
	s1, s2 := w1.hists[seriesID{int(vllm.TTFT), ""}], w2.hists[seriesID{int(vllm.TTFT), ""}]
	if &s1.bounds[0] != &s2.bounds[0] {
		t.Error("two workers of one scratch keep two copies of one layout's bounds")
	}
	if &s1.counts[0] == &s2.counts[0] {
		t.Fatal("two workers share their counts")
	}

	// w1's engine restarts with another layout; w2's has a second series of layout b.
	inc := w1.Observe(&page.EnginePage{Hists: []page.HistSeries{hist("", b, 1)}}, 0)
	checkBounds(t, inc)
	if !slices.Equal(s1.bounds, b) {
		t.Errorf("after the layout change the state's bounds are %v, want %v", s1.bounds, b)
	}
	inc = w2.Observe(&page.EnginePage{Hists: []page.HistSeries{hist("", a, 4), hist(`model_name="x"`, b, 1)}}, 0)
	checkBounds(t, inc)
	if got := len(inc.Hists[vllm.TTFT].Buckets); got != 5 {
		t.Errorf("the family's two layouts merged into %d buckets, want 5", got)
	}

	// Past the table's bound, layouts are not kept in it but still given.
	for i := range maxLayouts + 10 {
		les := []float64{float64(i) + 0.5, math.Inf(1)}
		got := s.bounds.of([]page.Bucket{{Le: les[0]}, {Le: les[1]}})
		if !slices.Equal(got, les) {
			t.Fatalf("layout %d: bounds %v, want %v", i, got, les)
		}
	}
	if n := len(s.bounds.byKey); n != maxLayouts {
		t.Errorf("the table holds %d layouts, want its bound %d", n, maxLayouts)
	}
}
