package core

// externalCache is a KV connector's cache shared by every engine of the fleet (LMCache's CPU
// or disk store, say): the full blocks any engine computed, by their prefix hash, up to a
// capacity, the oldest saved going first. An engine that misses its own prefix cache looks
// there next and loads what it finds instead of computing it, so it serves blocks that the
// engine itself evicted and blocks that other engines computed. It outlives engine restarts.
type externalCache struct {
	has   map[uint64]bool
	ring  []uint64 // saved hashes, oldest at next once full
	next  int
	limit int
}

func NewExternalCache(blocks int) *externalCache {
	return &externalCache{has: map[uint64]bool{}, limit: blocks}
}

// save stores the block with hash h, evicting the oldest block when full.
func (c *externalCache) save(h uint64) {
	if c.has[h] {
		return
	}
	c.has[h] = true
	if len(c.ring) < c.limit {
		c.ring = append(c.ring, h)
		return
	}
	delete(c.has, c.ring[c.next])
	c.ring[c.next] = h
	c.next = (c.next + 1) % c.limit
}

// lookup returns how many of hashes, from index from on and below max, it holds in a row.
func (c *externalCache) lookup(hashes []uint64, from, max int) int {
	n := 0
	for i := from; i < max && i < len(hashes) && c.has[hashes[i]]; i++ {
		n++
	}
	return n
}
