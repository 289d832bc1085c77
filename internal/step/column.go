package step

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
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
	r := c.reader()
	for range c.n {
		f(r.next())
	}
}

// appendTo appends every value to xs in order, and returns it.
func (c *floats) appendTo(xs []float64) []float64 {
	xs = slices.Grow(xs, c.n)
	r := c.reader()
	for range c.n {
		xs = append(xs, r.next())
	}
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

// len is the number of values; a nil column has none.
func (c *ints) len() int {
	if c == nil {
		return 0
	}
	return c.n
}

// each calls f with every value in order.
func (c *ints) each(f func(int64)) {
	if c == nil {
		return
	}
	r := c.reader()
	for range c.n {
		f(r.next())
	}
}

// floatsReader reads a floats column from its start.
type floatsReader struct {
	b []byte
	x uint64
}

func (c *floats) reader() floatsReader { return floatsReader{b: c.b} }

// next returns the next value; the caller knows how many there are.
func (r *floatsReader) next() float64 {
	tag := r.b[0]
	r.b = r.b[1:]
	if tag != 0 {
		d, k := binary.Uvarint(r.b)
		r.b = r.b[k:]
		r.x ^= d << (tag - 1)
	}
	return math.Float64frombits(r.x)
}

// intsReader reads an ints column from its start.
type intsReader struct {
	b []byte
	x int64
}

func (c *ints) reader() intsReader {
	if c == nil {
		return intsReader{}
	}
	return intsReader{b: c.b}
}

// next returns the next value; the caller knows how many there are.
func (r *intsReader) next() int64 {
	d, k := binary.Varint(r.b)
	r.b = r.b[k:]
	r.x += d
	return r.x
}
