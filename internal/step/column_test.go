package step

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestColumnsGiveBackTheirValues checks that the columns give back every value with all its
// bits, in order: repeats, small integers, fractions, signed zeros, NaNs with payloads,
// infinities, and random bits; durations and offsets of any size, extremes included.
func TestColumnsGiveBackTheirValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fs := []float64{0, 0, math.Copysign(0, -1), 1, 1, 2, 37, 41, 0.5, 0.83, math.NaN(),
		math.Float64frombits(0x7ff8000000000001), math.Inf(1), math.Inf(-1), math.MaxFloat64,
		math.SmallestNonzeroFloat64, -1e300}
	is := []int64{0, 0, 500e6, 499_999_999, 500_001_234, -1, math.MaxInt64, math.MinInt64, 0, math.MinInt64}
	for range 5000 {
		fs = append(fs, math.Float64frombits(rng.Uint64()), float64(rng.IntN(100)), rng.Float64())
		is = append(is, int64(rng.Uint64()), rng.Int64N(1e9))
	}
	var fc floats
	for _, f := range fs {
		fc.add(f)
	}
	if fc.len() != len(fs) {
		t.Fatalf("floats: len %d, want %d", fc.len(), len(fs))
	}
	var got []float64
	fc.each(func(v float64) { got = append(got, v) })
	bitsOf := func(xs []float64) []uint64 {
		var b []uint64
		for _, x := range xs {
			b = append(b, math.Float64bits(x))
		}
		return b
	}
	if !slices.Equal(bitsOf(got), bitsOf(fs)) {
		t.Fatal("floats: values come back with other bits")
	}
	var ic ints
	for _, i := range is {
		ic.add(i)
	}
	var goti []int64
	ic.each(func(i int64) { goti = append(goti, i) })
	if ic.len() != len(is) || !slices.Equal(goti, is) {
		t.Fatalf("ints: got %d values, want %d, or other values", len(goti), len(is))
	}
}

// TestFloatsCompact checks that the values the columns are for take little room: a repeated
// value one byte, a small integer a few.
func TestFloatsCompact(t *testing.T) {
	var c floats
	c.add(7)
	n := len(c.b)
	for range 100 {
		c.add(7)
	}
	if got := len(c.b) - n; got != 100 {
		t.Errorf("100 repeats take %d bytes, want 100", got)
	}
	c.add(12)
	if got := len(c.b) - n - 100; got > 1+binary.MaxVarintLen16 {
		t.Errorf("a small integer after another takes %d bytes", got)
	}
}

func FuzzFloats(f *testing.F) {
	f.Add(uint64(0), uint64(1), uint64(math.Float64bits(0.5)))
	f.Fuzz(func(t *testing.T, a, b, c uint64) {
		var col floats
		in := []uint64{a, b, c, a, a ^ b}
		for _, x := range in {
			col.add(math.Float64frombits(x))
		}
		var out []uint64
		col.each(func(v float64) { out = append(out, math.Float64bits(v)) })
		if !slices.Equal(in, out) {
			t.Fatalf("got %x, want %x", out, in)
		}
	})
}
