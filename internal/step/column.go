package step

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// An open step must keep every per-interval sample that its statistics need (an exact p95 of a
// pool of samples needs them all), for every worker, for as long as the step lasts: at 1,000
// workers, 2 Hz and 10-minute steps, over a million samples per series. The columns below keep
// them losslessly in a few bytes each instead of a 32-byte timestamped sample: consecutive
// values of a series are alike (request counts repeat, token counts are small integers), so
// each value is stored as its bits' XOR with the previous value's, without the XOR's trailing
// zeros, as a uvarint. Reading a column gives back the exact bits in the order they came, so
// that every sum over them adds in the same order as before and gives the same float.

// floats is an append-only column of float64 values.
type floats struct {
	b    []byte
	n    int
	last uint64 // bits of the last value
}

// add appends v.
func (c *floats) add(v float64) {
	x := math.Float64bits(v)
	d := x ^ c.last
	c.last = x
	c.n++
	if d == 0 {
		c.b = append(c.b, 0)
		return
	}
	tz := bits.TrailingZeros64(d)
	c.b = append(c.b, byte(tz+1))
	c.b = binary.AppendUvarint(c.b, d>>tz)
}

// len is the number of values.
func (c *floats) len() int { return c.n }

// each calls f with every value in order.
func (c *floats) each(f func(float64)) {
	var x uint64
	for i := 0; i < len(c.b); {
		tag := c.b[i]
		i++
		if tag != 0 {
			d, k := binary.Uvarint(c.b[i:])
			i += k
			x ^= d << (tag - 1)
		}
		f(math.Float64frombits(x))
	}
}

// appendTo appends every value in order to xs.
func (c *floats) appendTo(xs []float64) []float64 {
	c.each(func(v float64) { xs = append(xs, v) })
	return xs
}

// ints is an append-only column of int64 values (durations, offsets), each stored as its
// difference from the previous one: scrape times and the spans between them change little.
type ints struct {
	b    []byte
	n    int
	last int64
}

// add appends v.
func (c *ints) add(v int64) {
	c.b = binary.AppendVarint(c.b, v-c.last)
	c.last = v
	c.n++
}

// len is the number of values.
func (c *ints) len() int { return c.n }

// each calls f with every value in order.
func (c *ints) each(f func(int64)) {
	var x int64
	for i := 0; i < len(c.b); {
		d, k := binary.Varint(c.b[i:])
		i += k
		x += d
		f(x)
	}
}
