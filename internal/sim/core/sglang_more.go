package core

import (
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// sgLogPool sets the KV pool's gauges at a log point: the free blocks that hold a cached block
// are evictable, the others available.
func (e *Engine) sgLogPool(g *snap.SglangGauges) {
	p := e.Pool
	evictable := 0
	for b := range p.ref {
		if p.ref[b] == 0 && p.hashed[b] && p.Cached[p.hash[b]] == int32(b) {
			evictable++
		}
	}
	g.KvEvictable = evictable * snap.BlockSize
	g.KvAvailable = (p.numFree() - evictable) * snap.BlockSize
}
