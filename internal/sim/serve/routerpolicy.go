package serve

import (
	"sync"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
)

// The router's policies, as sgl-model-gateway's src/policies/ choose a worker: round_robin.rs
// and cache_aware.rs, with cache_aware's defaults of SGLang's router (--cache-threshold 0.3,
// --balance-abs-threshold 64, --balance-rel-threshold 1.5). Every worker is taken as healthy:
// the simulated router runs no health checks and no circuit breaker, whose default thresholds
// (three failed checks a minute apart, ten failures in a row) a simulated run seldom reaches;
// a failing worker is left to the retries instead.
const (
	cacheThreshold      = 0.3
	balanceAbsThreshold = 64
	balanceRelThreshold = 1.5
	// cacheTexts bounds the texts the approximate tree keeps per worker; the router evicts its
	// tree's least recently used leaves past --max-tree-size instead.
	cacheTexts = 256
)

// routerPolicy chooses the worker of each request; done is called when its answer is in.
type routerPolicy interface {
	name() string
	choose(text string) int
	done(worker int)
}

func newRouterPolicy(name string, workers int) routerPolicy {
	if name == fleetconfig.RouterCacheAware {
		return &cacheAware{load: make([]int, workers), texts: make([][]cachedText, workers)}
	}
	return &roundRobin{workers: workers}
}

// roundRobin takes the workers in turn, whatever the request (round_robin.rs).
type roundRobin struct {
	mu      sync.Mutex
	workers int
	next    int
}

func (*roundRobin) name() string { return fleetconfig.RouterRoundRobin }

func (p *roundRobin) choose(string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.next % p.workers
	p.next++
	return w
}

func (*roundRobin) done(int) {}

// cacheAware is cache_aware.rs: while the workers' loads (the router's requests in flight on
// each) are balanced, a request goes to the worker whose approximate prefix tree shares the
// longest prefix with its text, if that prefix is more than cacheThreshold of the text, else
// to the least loaded worker; when they are imbalanced (the most loaded has more than
// balanceAbsThreshold requests over the least and more than balanceRelThreshold times its
// count), to the least loaded. Either way the text is recorded for the chosen worker.
//
// Simplified: the router's radix tree over the characters of every text it routed, shared by
// the workers as tenants, is here each worker's list of its most recent texts (cacheTexts of
// them), matched byte by byte; the longest match wins and a tie goes to the worker that saw
// the text most recently, as the tree's tenant with the newest access does. The least loaded
// worker is the first of the lowest load, as the router's min_by_key gives.
type cacheAware struct {
	mu    sync.Mutex
	load  []int
	texts [][]cachedText // per worker, oldest first
	seq   uint64
}

type cachedText struct {
	text string
	seq  uint64 // when it was last routed
}

func (*cacheAware) name() string { return fleetconfig.RouterCacheAware }

func (p *cacheAware) choose(text string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	least, lo, hi := 0, p.load[0], p.load[0]
	for i, l := range p.load {
		if l < lo {
			least, lo = i, l
		}
		hi = max(hi, l)
	}
	w := least
	if !(hi-lo > balanceAbsThreshold && float64(hi) > float64(lo)*balanceRelThreshold) && text != "" {
		best, bestLen, bestSeq := -1, 0, uint64(0)
		for i, ts := range p.texts {
			for _, t := range ts {
				n := commonPrefix(t.text, text)
				if n > bestLen || n == bestLen && n > 0 && t.seq > bestSeq {
					best, bestLen, bestSeq = i, n, t.seq
				}
			}
		}
		if best >= 0 && float64(bestLen)/float64(len(text)) > cacheThreshold {
			w = best
		}
	}
	p.remember(w, text)
	p.load[w]++
	return w
}

// remember records text as routed to worker w, now.
func (p *cacheAware) remember(w int, text string) {
	p.seq++
	ts := p.texts[w]
	for i, t := range ts {
		if t.text == text {
			ts = append(ts[:i], ts[i+1:]...)
			break
		}
	}
	if len(ts) == cacheTexts {
		ts = ts[1:]
	}
	p.texts[w] = append(ts, cachedText{text, p.seq})
}

func (p *cacheAware) done(w int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.load[w]--
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
