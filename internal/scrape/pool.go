package scrape

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/target"
)

// Options configure every target's scrapes.
type Options struct {
	Client  *http.Client
	Timeout time.Duration
	// FirstTimeout bounds a target's first two scrapes, and in a pool every scrape while any
	// target makes its first ones, when it is longer than Timeout; 0 is DefaultFirstTimeout. A fleet's first pages cost the most on both sides
	// (full pages, parsed in full, on new connections) and all come in the first interval:
	// thousands of them at once took longer than a scrape's timeout and failed, leaving
	// targets without a baseline, where a longer wait gets every one.
	FirstTimeout time.Duration
	MaxBody      int64
	// Limits bound the series and workers of one page; a page over them is a failed scrape
	// (reason "limit"). Zero values mean no limit.
	Limits   page.Limits
	KeepBody bool // keep page bodies in results, for recordings
	// Clock times the scrapes (Result.Start, Result.Duration) and their spread offsets; nil is
	// the wall clock.
	Clock clock.Clock
	// WorkerLabels tell a page's workers apart besides engine (see page.Options); nil means
	// page.DefaultWorkerLabels, an empty list none.
	WorkerLabels []string

	// Compression is what pages are asked to be compressed with; "" is DefaultCompression.
	Compression Compression
	// RequestNames asks targets for the samples vllmstat reads only, by name (see names.go):
	// after a full page, a target's scrapes name every sample of the families vllmstat reads in
	// the namespaces its page used. A target whose answer lacks a name its full page has, or
	// refuses the query, is asked again for the full page within the same scrape, and for full
	// pages from then on.
	// Only a Pool's targets restrict; Fetch always asks for the full page.
	RequestNames bool
	// Servers bound the servers a router's page names, asked for their weight versions (see
	// servers.go); nil asks none.
	Servers *ServerRules
	// Logger is told about targets that answer restricted requests wrongly; nil logs nothing.
	Logger *slog.Logger

	// Spread delays each target's tick scrapes by a fixed offset in [0, Spread) derived from its
	// URL, so that a large fleet is not scraped in one burst per tick. Boundary scrapes are never
	// delayed. 0 scrapes every target on the tick.
	Spread time.Duration
	// SpreadFrom is how many targets the pool must have for Spread to apply: a small fleet gains
	// nothing from it and keeps its samples aligned. It is checked as targets come and go, so
	// a fleet found by discovery after the start is spread too.
	SpreadFrom int
	// Burst is how many targets share an offset: the pool's n targets are spread over
	// ceil(n/Burst) offsets, a fraction of Spread apart, and fewer than two offsets means no
	// spread. 0 gives every target an offset of its own. Targets scraped together cost far
	// less than the same scrapes one at a time: each scrape alone wakes the process, its
	// goroutines and their cold caches anew (at a thousand targets, 125 µs of CPU per scrape
	// alone against 85 µs in bursts of 128). Bursts of a hundred keep what spreading is for:
	// no thousand pages in flight at once.
	Burst int

	// fast, when the pool made its own client, sends every plain-HTTP target's scrapes (see
	// fastClient); nil sends every scrape through Client.
	fast *fastClient
	// AfterFirstPages is called once, on a target's goroutine, when every target of the pool
	// has made its first scrapes for the first time (a fleet's start: its most expensive
	// pages, read in full and learnt); nil for nothing.
	AfterFirstPages func()

	// learning counts the pool's targets that have not made their first scrapes yet (see
	// scraper.timeout); nil outside a pool.
	learning *atomic.Int64
	// boundaryInFlight bounds a pool's boundary scrapes in flight at once; 0 is
	// maxBoundaryInFlight.
	boundaryInFlight int
}

// maxBoundaryInFlight is how many boundary scrapes (and ScrapeNow's) a pool has in flight at
// once. A step end asks every target at once, and each scrape in flight holds a request, a read
// buffer and its answer from the HTTP client's pools, which keep them after the burst until two
// garbage collections have passed: at 5,000 targets with 20 s steps that was 180 MB of the
// 380 MB of live heap. Fewer in flight made a 1,000-target step end slower (at 256, by about
// 10 ms at the median): a fleet of up to this many is not held back. A target that does not
// answer holds one until its timeout.
const maxBoundaryInFlight = 1024

// sharedClient is the client of Fetch calls that bring none.
var sharedClient = sync.OnceValue(NewClient)

func (o Options) withDefaults() Options {
	if o.Client == nil {
		o.Client = sharedClient()
	}
	if o.FirstTimeout <= 0 {
		o.FirstTimeout = DefaultFirstTimeout
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Compression == "" {
		o.Compression = DefaultCompression
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Pool runs one goroutine per target and sends every Result to out. Its methods are called by
// one owner goroutine (the collector), which must keep receiving from out until Close returns.
type Pool struct {
	opt     Options
	out     chan<- Result
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	targets map[string]*instance
	// spread is Options.Spread while the pool has at least Options.SpreadFrom targets, else 0;
	// slots the number of offsets (see Options.Burst), 0 for one per target. Both are read by
	// the targets' goroutines at each tick.
	spread  atomic.Int64
	slots   atomic.Int64
	order   []string
	lastGen uint64
	// inFlight holds a token per boundary scrape in flight (see maxBoundaryInFlight).
	inFlight chan struct{}
	// starting is the last Add's batch of goroutines (see Started), nil before the first.
	starting *startBatch
	// versions is set once boundary scrapes read the engines' weight versions (ReadVersions).
	versions atomic.Bool
}

// instance is a target while it is in the pool: removing its URL and adding it again makes a new
// instance, with a new generation.
type instance struct {
	url      string
	gen      uint64
	auth     atomic.Pointer[target.Auth] // replaced when the same URL comes with other credentials
	tick     chan struct{}
	boundary chan uint64
	busy     atomic.Bool
	version  atomic.Bool // its next scrape reads the engine's weight version (AskVersion)
	cancel   context.CancelFunc
	start    *startBatch // of the Add that started it
}

// offset spreads targets over the interval by a hash of the URL (FNV-1a), stable across runs:
// to one of slots offsets spread/slots apart, or, with slots 0, anywhere in [0, spread).
func offset(url string, spread time.Duration, slots int64) time.Duration {
	if spread <= 0 {
		return 0
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(url); i++ {
		h ^= uint64(url[i])
		h *= 1099511628211
	}
	if slots > 0 {
		return time.Duration(h%uint64(slots)) * (spread / time.Duration(slots))
	}
	return time.Duration(h % uint64(spread))
}

// spreading returns the spread and the number of offsets of a pool of n targets.
func spreading(n int, opt *Options) (spread time.Duration, slots int64) {
	if n < opt.SpreadFrom || opt.Spread <= 0 {
		return 0, 0
	}
	if opt.Burst > 0 {
		slots = int64((n + opt.Burst - 1) / opt.Burst)
		if slots < 2 {
			return 0, 0
		}
	}
	return opt.Spread, slots
}

// NewPool returns a pool with no targets. A pool given no Client scrapes plain-HTTP targets
// with a leaner client than net/http's (see fastClient), and the others with NewClient's.
func NewPool(opt Options, out chan<- Result) *Pool {
	own := opt.Client == nil
	if own {
		opt.Client = NewClient()
	}
	opt = opt.withDefaults()
	if own {
		opt.fast = newFastClient(opt.MaxBody)
	}
	opt.learning = new(atomic.Int64)
	if opt.AfterFirstPages != nil {
		opt.AfterFirstPages = sync.OnceFunc(opt.AfterFirstPages)
	}
	if opt.boundaryInFlight <= 0 {
		opt.boundaryInFlight = maxBoundaryInFlight
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{opt: opt, out: out, ctx: ctx, cancel: cancel, targets: map[string]*instance{},
		inFlight: make(chan struct{}, opt.boundaryInFlight)}
}

// Targets returns the current targets in the order they were added.
func (p *Pool) Targets() []string { return append([]string(nil), p.order...) }

// Generation returns the generation of url's current instance, false when url is not a target.
// A result whose Gen differs comes from an instance that was removed: drop it.
func (p *Pool) Generation(url string) (uint64, bool) {
	t, ok := p.targets[url]
	if !ok {
		return 0, false
	}
	return t.gen, true
}

// Auth returns the credentials url's scrapes send (the zero Auth when url is not a target).
func (p *Pool) Auth(url string) target.Auth {
	if t, ok := p.targets[url]; ok {
		return *t.auth.Load()
	}
	return target.Auth{}
}

// Set makes ts the targets (their URLs must be distinct): new ones start with a new
// generation, missing ones stop (a scrape of theirs in flight may still deliver its result,
// with the old generation), and kept ones take the credentials given now. It returns the added
// and removed URLs.
func (p *Pool) Set(ts []target.Target) (added, removed []string) {
	keep := make(map[string]bool, len(ts))
	for _, t := range ts {
		keep[t.URL] = true
	}
	var gone []string
	for _, u := range p.order {
		if !keep[u] {
			gone = append(gone, u)
		}
	}
	removed = p.Remove(gone)
	return p.Add(ts), removed
}

// Add starts the targets of ts that are not targets yet (their URLs must be distinct), each
// with a new generation, after the others; those already there take the credentials given now.
// It returns the added URLs. Its cost is in proportion to len(ts).
func (p *Pool) Add(ts []target.Target) (added []string) {
	var fresh []*instance
	for _, tg := range ts {
		auth := tg.Auth
		if t, ok := p.targets[tg.URL]; ok {
			if !t.auth.Load().Equal(auth) {
				t.auth.Store(&auth)
			}
			continue
		}
		p.lastGen++
		t := &instance{url: tg.URL, gen: p.lastGen, tick: make(chan struct{}, 1), boundary: make(chan uint64, 1)}
		t.auth.Store(&auth)
		p.targets[tg.URL] = t
		p.order = append(p.order, tg.URL)
		added = append(added, tg.URL)
		fresh = append(fresh, t)
	}
	if len(fresh) == 0 {
		return nil
	}
	b := &startBatch{done: make(chan struct{})}
	b.left.Store(int64(len(fresh)))
	p.starting = b
	for _, t := range fresh {
		var ctx context.Context
		ctx, t.cancel = context.WithCancel(p.ctx)
		t.start = b
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.loop(ctx, t)
		}()
	}
	p.respread()
	return added
}

// startBatch counts the goroutines of one Add that are not ready to scrape yet.
type startBatch struct {
	left atomic.Int64
	done chan struct{} // closed once left is 0
}

// started tells b that one of its goroutines is ready.
func (b *startBatch) started() {
	if b.left.Add(-1) == 0 {
		close(b.done)
	}
}

// closedChan is a channel that is always closed.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Started returns a channel closed once the goroutines of the targets of the last Add are
// ready to scrape. A caller that adds many targets in batches waits for it between them: a
// target's goroutine costs tens of microseconds to start, and starting tens of thousands at
// once queues them ahead of every other goroutine of the process (its API's among them) for a
// second or more.
func (p *Pool) Started() <-chan struct{} {
	if p.starting == nil {
		return closedChan
	}
	return p.starting.done
}

// Remove stops the targets with these URLs; other URLs are ignored. A scrape in flight may
// still deliver its result, with the old generation. It returns the removed URLs. Its cost is
// in proportion to len(urls), and one pass over the targets' order.
func (p *Pool) Remove(urls []string) (removed []string) {
	gone := make(map[string]bool, len(urls))
	for _, u := range urls {
		t, ok := p.targets[u]
		if !ok {
			continue
		}
		t.cancel()
		delete(p.targets, u)
		gone[u] = true
		removed = append(removed, u)
	}
	if len(removed) == 0 {
		return nil
	}
	p.order = slices.DeleteFunc(p.order, func(u string) bool { return gone[u] })
	p.respread()
	return removed
}

// respread sets the spread and the number of offsets for the pool's size.
func (p *Pool) respread() {
	spread, slots := spreading(len(p.order), &p.opt)
	p.spread.Store(int64(spread))
	p.slots.Store(slots)
}

// Tick asks every idle target for a scrape and returns the targets skipped because their
// previous scrape is still running.
func (p *Pool) Tick() (skipped []string) {
	for _, u := range p.order {
		t := p.targets[u]
		if t.busy.Load() {
			skipped = append(skipped, u)
			continue
		}
		select {
		case t.tick <- struct{}{}:
		default:
			skipped = append(skipped, u) // a tick is already queued
		}
	}
	return skipped
}

// Boundary asks every target for a fresh scrape answering request id: right away when idle,
// right after the scrape in flight otherwise. It returns the targets asked.
func (p *Pool) Boundary(id uint64) []string {
	for _, u := range p.order {
		t := p.targets[u]
		select {
		case <-t.boundary: // an older request nobody answered yet: this one supersedes it
		default:
		}
		t.boundary <- id
	}
	return p.Targets()
}

// ScrapeNow asks the targets with these URLs for a scrape right away rather than at the next
// tick (a target just added, whose registration waits for its baseline), unless a boundary
// scrape is already asked of them. Its result answers no boundary (Boundary 0).
func (p *Pool) ScrapeNow(urls []string) {
	for _, u := range urls {
		if t := p.targets[u]; t != nil {
			select {
			case t.boundary <- 0:
			default:
			}
		}
	}
}

// ReadVersions makes every boundary scrape from now on read the engine's weight version after
// its page. A run whose trainer never publishes a version asks the engines nothing more than
// their pages.
func (p *Pool) ReadVersions() { p.versions.Store(true) }

// AskVersion asks the targets with these URLs to read their engines' weight version at their
// next scrape; other URLs are ignored.
func (p *Pool) AskVersion(urls []string) {
	for _, u := range urls {
		if t := p.targets[u]; t != nil {
			t.version.Store(true)
		}
	}
}

// Close stops every target and waits for their goroutines.
func (p *Pool) Close() {
	p.cancel()
	p.wg.Wait()
}

func (p *Pool) loop(ctx context.Context, t *instance) {
	// The target's scrape state lives here, on the one goroutine that scrapes it.
	auth := t.auth.Load()
	// The target removed or the pool closed (ctx done): a scrape in flight ends at once, not
	// when its timeout runs out.
	s := newScraper(ctx, target.Target{URL: t.url, Auth: *auth}, &p.opt)
	defer s.close()
	// One timer for the spread offset of every tick, reset each time: a timer per tick was a
	// sixth of the garbage a 1,000-target run made.
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	t.start.started()
	for {
		var id uint64
		asked := false // a boundary scrape or ScrapeNow's, not a tick's
		select {
		case <-ctx.Done():
			return
		case <-t.tick:
			t.busy.Store(true)
			if off := offset(t.url, time.Duration(p.spread.Load()), p.slots.Load()); off > 0 {
				if timer == nil {
					timer = p.opt.Clock.NewTimer(off)
				} else {
					timer.Reset(off)
				}
				select {
				case <-ctx.Done():
					timer.Stop()
					return
				case <-timer.C():
				case id = <-t.boundary: // a step is ending: scrape now, for the boundary
					timer.Stop()
					asked = true
				}
			}
		case id = <-t.boundary:
			asked = true
			// A tick waiting too is this scrape's: scraped again right after, its page would
			// come after what the boundary closed (at a run's exit, a page nobody counted).
			select {
			case <-t.tick:
			default:
			}
		}
		t.busy.Store(true)
		if asked {
			select {
			case p.inFlight <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
		if a := t.auth.Load(); a != auth { // Set gave the target other credentials
			auth = a
			s.setAuth(a)
		}
		version := t.version.Swap(false) || id != 0 && p.versions.Load()
		res := s.scrape()
		// A boundary scrape reads the version too (see ReadVersions): the step or phase it
		// closes gets the engines' versions as of its end. The scrape's duration is its page's
		// alone.
		if version && res.Err() == nil {
			if addrs := routerAddrs(res.Page); addrs != nil {
				res.Servers = s.readServerVersions(res.Page, addrs)
			} else {
				res.Version = s.readVersion(res.Page)
			}
		}
		if asked {
			<-p.inFlight
		}
		res.Gen, res.Boundary = t.gen, id
		t.busy.Store(false)
		select {
		case p.out <- res:
		case <-ctx.Done():
			return
		}
	}
}
