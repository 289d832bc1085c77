package core

// blockPool is an engine's paged KV cache with vLLM's prefix cache on top.
//
// Blocks hold blockSize tokens. A full block that a request has computed is registered under the
// hash of its content and of everything before it (see request.blockHash), so a later request
// whose prompt starts with the same tokens finds those blocks and skips their prefill. A block
// with no users stays cached until it is reused: free blocks wait in one queue, least recently
// freed first, and allocation takes the head of that queue, evicting its cache entry. This is the
// free-block queue and cached-block map of vLLM's KV cache manager.
type blockPool struct {
	ref    []int32
	hash   []uint64
	hashed []bool
	// The free queue is a doubly linked list through prev/next so that a cache hit can take a
	// block out of the middle in O(1).
	prev, next []int32
	head, tail int32
	nfree      int
	Cached     map[uint64]int32
	// kv, if set, sees every allocation and prefix-cache hit (see kvResidency).
	kv *kvResidency
}

const nilBlock = -1

func newBlockPool(n int) *blockPool {
	p := &blockPool{
		ref:    make([]int32, n),
		hash:   make([]uint64, n),
		hashed: make([]bool, n),
		prev:   make([]int32, n),
		next:   make([]int32, n),
		Cached: make(map[uint64]int32, n),
	}
	p.reset()
	return p
}

// reset frees every block and forgets the cache: a restarted server starts empty.
func (p *blockPool) reset() {
	n := len(p.ref)
	for i := range n {
		p.ref[i] = 0
		p.hashed[i] = false
		p.prev[i] = int32(i - 1)
		p.next[i] = int32(i + 1)
	}
	p.next[n-1] = nilBlock
	p.head, p.tail = 0, int32(n-1)
	p.nfree = n
	clear(p.Cached)
	if p.kv != nil {
		p.kv.reset()
	}
}

func (p *blockPool) numBlocks() int { return len(p.ref) }

func (p *blockPool) numFree() int { return p.nfree }

func (p *blockPool) NumUsed() int { return len(p.ref) - p.nfree }

// usage is the fraction of blocks in use, which vLLM reports as kv_cache_usage_perc.
func (p *blockPool) usage() float64 { return float64(p.NumUsed()) / float64(len(p.ref)) }

// lookup returns how many of hashes, from the first on and at most max, are cached in a row.
func (p *blockPool) lookup(hashes []uint64, max int) int {
	n := 0
	for n < max && n < len(hashes) {
		if _, ok := p.Cached[hashes[n]]; !ok {
			break
		}
		n++
	}
	return n
}

// cachedBlock returns the block registered under h; lookup must have found it.
func (p *blockPool) cachedBlock(h uint64) int32 { return p.Cached[h] }

// touch adds a user to block b, taking it off the free queue if it had none.
func (p *blockPool) touch(b int32) {
	if p.kv != nil {
		p.kv.accessed(b)
	}
	if p.ref[b] == 0 {
		p.unlink(b)
	}
	p.ref[b]++
}

// allocate takes the least recently freed block, evicting its cache entry. The caller checks
// numFree first.
func (p *blockPool) allocate() int32 {
	b := p.head
	p.unlink(b)
	if p.hashed[b] {
		if p.Cached[p.hash[b]] == b {
			delete(p.Cached, p.hash[b])
		}
		p.hashed[b] = false
	}
	p.ref[b] = 1
	if p.kv != nil {
		p.kv.allocated(b)
	}
	return b
}

// release drops one user of b; a block with no users goes to the tail of the free queue and
// stays cached until allocate reuses it.
func (p *blockPool) release(b int32) {
	p.ref[b]--
	if p.ref[b] == 0 {
		p.pushTail(b)
	}
}

// register puts block b in the cache under h, unless another block already holds that content
// (two requests that computed the same block in the same step); the first one stays the cached
// copy and b is freed as an ordinary block later.
func (p *blockPool) register(b int32, h uint64) {
	if _, ok := p.Cached[h]; ok {
		return
	}
	p.Cached[h] = b
	p.hash[b] = h
	p.hashed[b] = true
}

func (p *blockPool) unlink(b int32) {
	pr, nx := p.prev[b], p.next[b]
	if pr == nilBlock {
		p.head = nx
	} else {
		p.next[pr] = nx
	}
	if nx == nilBlock {
		p.tail = pr
	} else {
		p.prev[nx] = pr
	}
	p.prev[b], p.next[b] = nilBlock, nilBlock
	p.nfree--
}

func (p *blockPool) pushTail(b int32) {
	p.prev[b], p.next[b] = p.tail, nilBlock
	if p.tail == nilBlock {
		p.head = b
	} else {
		p.next[p.tail] = b
	}
	p.tail = b
	p.nfree++
}
