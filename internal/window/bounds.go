package window

import (
	"encoding/binary"
	"math"

	"github.com/vllmstat/vllmstat/internal/page"
)

// boundsTable hands out histograms' bucket bounds, one slice per layout. A fleet's engines
// nearly all have the same few layouts, and each of a worker's histogram states, and each
// step's accumulated increases, kept its own copy of the bounds beside the counts: half of
// what they held. The table belongs to a Scratch, so to the one goroutine that observes its
// workers; slices it hands out are never written.
type boundsTable struct {
	byKey map[string][]float64
}

// maxLayouts bounds a table: layouts past it (a hostile or very odd fleet) get slices of their
// own rather than grow the table without end.
const maxLayouts = 1024

// of returns bs's upper bounds, shared with every earlier caller that gave the same bounds.
func (t *boundsTable) of(bs []page.Bucket) []float64 {
	key := make([]byte, 0, 8*len(bs))
	for _, b := range bs {
		key = binary.LittleEndian.AppendUint64(key, math.Float64bits(b.Le))
	}
	if les, ok := t.byKey[string(key)]; ok {
		return les
	}
	les := make([]float64, len(bs))
	for i, b := range bs {
		les[i] = b.Le
	}
	if t.byKey == nil {
		t.byKey = map[string][]float64{}
	}
	if len(t.byKey) < maxLayouts {
		t.byKey[string(key)] = les
	}
	return les
}

// boundsOf reports whether les are bs's upper bounds.
func boundsOf(les []float64, bs []page.Bucket) bool {
	if len(les) != len(bs) {
		return false
	}
	for i, b := range bs {
		if les[i] != b.Le {
			return false
		}
	}
	return true
}
