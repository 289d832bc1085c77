package core

import (
	"testing"
)

func TestExternalCacheEvictsOldest(t *testing.T) {
	c := NewExternalCache(2)
	c.save(1)
	c.save(2)
	c.save(1) // already there: not saved again, still the oldest
	c.save(3)
	if c.has[1] || !c.has[2] || !c.has[3] {
		t.Errorf("after saving 1, 2, 1, 3 in a cache of 2: holds %v, want 2 and 3", c.has)
	}
	if n := c.lookup([]uint64{9, 2, 3, 1}, 1, 4); n != 2 {
		t.Errorf("lookup from 1 found %d in a row, want 2", n)
	}
}
