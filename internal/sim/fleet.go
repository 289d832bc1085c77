package sim

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/serve"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// Fleet is a running simulated fleet: one goroutine advances the Sim in step with the wall clock
// (scaled by Speed) and publishes each server's page state; each server answers HTTP on its own
// port. Start it, read URLs, and Close it.
type Fleet struct {
	cfg       fleetconfig.Config
	log       *slog.Logger
	clock     clock.Clock
	start     time.Time
	sim       *fleetmodel.Sim // owned by the run goroutine
	servers   []*serve.Server
	router    *serve.Router // SGLang's router in front of the servers, nil without one
	batches   chan int
	edges     chan fleetmodel.LoopEdge
	publishes chan core.Publish
	restarts  []int // per server, as last logged; owned by the run goroutine
	// edgesFull and publishesFull are set once an edge or a publish was dropped, so that the
	// drops are logged once; owned by the run goroutine.
	edgesFull, publishesFull bool
	// truth takes GroundTruth's requests to the run goroutine, which owns the simulation;
	// stopped is closed when that goroutine has ended, leaving the last ground truth in final.
	truth   chan chan core.GroundTruth
	stopped chan struct{}
	final   core.GroundTruth // guarded by mu; set when the run goroutine ends
	// ops takes the HTTP side's requests and control calls to the run goroutine (see drive.go).
	ops chan fleetOp
	// resume takes Resume's calls to the run goroutine, which holds the simulated time at
	// each batch end and edge it delivered until they came (Config.WaitForDriver); held is the
	// wall time it held it in all, which the simulated time leaves out. held is owned by the
	// run goroutine.
	resume chan struct{}
	held   time.Duration
	// advancedAt is the wall time the simulation was last advanced to; owned by the run
	// goroutine.
	advancedAt time.Time

	mu     sync.Mutex
	totals map[string]float64 // guarded by mu; as of the last publish

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Start validates cfg, opens every server's port and starts the simulation. Cancelling ctx
// stops the fleet as Close does, but only Close waits for it.
func Start(ctx context.Context, cfg fleetconfig.Config) (*Fleet, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := NewSim(cfg)
	if err != nil {
		return nil, fmt.Errorf("start fleet: %w", err)
	}
	var lns []net.Listener
	for i := range cfg.Servers {
		port := 0
		if cfg.Port != 0 {
			port = cfg.Port + i
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(port)))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("start fleet: server %d: %w", i, err)
		}
		lns = append(lns, ln)
	}
	var routerLn net.Listener
	if cfg.Router {
		port := 0
		if cfg.Port != 0 {
			port = cfg.Port + cfg.Servers
		}
		var err error
		if routerLn, err = net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(port))); err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("start fleet: router: %w", err)
		}
	}
	f := &Fleet{cfg: cfg, log: log, clock: cfg.Clock, start: cfg.Clock.Now(), sim: s, restarts: make([]int, cfg.Servers),
		truth: make(chan chan core.GroundTruth), stopped: make(chan struct{}), ops: make(chan fleetOp), resume: make(chan struct{}, 1024)}
	if cfg.Workload.Kind == workload.WorkloadGRPO {
		f.batches = make(chan int, 1024)
	}
	if cfg.Workload.Colocated {
		f.edges = make(chan fleetmodel.LoopEdge, 1024)
	}
	if cfg.SyncsWeights() {
		f.publishes = make(chan core.Publish, 1024)
	}
	ctx, f.cancel = context.WithCancel(ctx)
	for i, ln := range lns {
		r := pageWriter(cfg)
		srv := serve.NewServer(ctx, i, ln, r, cfg, f.start, log)
		srv.Drive = f.do
		f.servers = append(f.servers, srv)
	}
	f.Publish()
	for i, srv := range f.servers {
		srv.Serve(lns[i], &f.wg)
		f.wg.Go(func() { srv.RunDownFaults(ctx, &f.wg) })
	}
	if routerLn != nil {
		var workers []string
		for _, u := range f.URLs() {
			workers = append(workers, strings.TrimSuffix(u, "/metrics"))
		}
		f.router = serve.NewRouter(routerLn, workers, cfg.SlowDelay+5*time.Second, log)
		f.router.Route(cfg.RouterPolicy, cfg.Clock)
		f.router.Serve(routerLn, &f.wg)
	}
	f.wg.Go(func() { f.run(ctx) })
	attrs := []any{"engine", cfg.Engine, "servers", cfg.Servers, "dp", cfg.DP}
	if cfg.Engine != fleetconfig.EngineSGLang && cfg.Engine != fleetconfig.EngineTRTLLM {
		attrs = append(attrs, "vllm_version", cfg.Version) // the page style of a vLLM fleet only
	}
	log.Info("fleet started", append(attrs, "workload", cfg.Workload.Kind, "seed", cfg.Seed, "speed", cfg.Speed)...)
	return f, nil
}

// URLs returns each server's page URL (/metrics, or /prometheus/metrics on TensorRT-LLM), server
// 0 first.
func (f *Fleet) URLs() []string {
	urls := make([]string, len(f.servers))
	for i, s := range f.servers {
		urls[i] = s.URL()
	}
	return urls
}

// RouterURL returns the router's /engine_metrics URL, "" for a fleet without a router.
func (f *Fleet) RouterURL() string {
	if f.router == nil {
		return ""
	}
	return f.router.URL()
}

// Batches delivers the number of each GRPO batch once every engine has finished it, after the
// pages show its end: the moment a trainer would end its step. It is nil for the Poisson
// workload. It is never closed; if nobody reads it, batch numbers past its buffer of 1024 are
// dropped rather than stalling the simulation.
func (f *Fleet) Batches() <-chan int { return f.batches }

// Edges delivers the edges of the colocated loop, in order, each after the pages show it: the
// moments a trainer would mark its phases and end its step. It is nil unless the workload is
// colocated. It is never closed; if nobody reads it, edges past its buffer of 1024 are dropped
// rather than stalling the simulation.
func (f *Fleet) Edges() <-chan fleetmodel.LoopEdge { return f.edges }

// Resume lets a fleet held at its start, at a batch end or at an edge go on
// (Config.WaitForDriver): one call to start it, then one per batch and edge read.
func (f *Fleet) Resume() { f.resume <- struct{}{} }

// Publishes delivers the trainer's publishes of new policy versions, in order, each once the
// simulation has reached it (the engines load it after that): the moments a trainer would tell
// vllmstat its new version. It is nil unless the workload runs the colocated or the async loop.
// It is never closed; if nobody reads it, publishes past its buffer of 1024 are dropped rather
// than stalling the simulation.
func (f *Fleet) Publishes() <-chan core.Publish { return f.publishes }

// Laggard returns the server and engine of the async loop's lagging engine; ok is false outside
// the async loop.
func (f *Fleet) Laggard() (server, engine int, ok bool) {
	if !f.cfg.Workload.Async {
		return 0, 0, false
	}
	e := f.sim.Engines[f.sim.Async.Laggard] // fixed at the start
	return e.Server, e.Index, true
}

// GroundTruth returns what the simulation did, as of the simulated time it has reached (see
// Sim.GroundTruth); after Close, as of the time it stopped.
func (f *Fleet) GroundTruth() core.GroundTruth {
	c := make(chan core.GroundTruth, 1)
	select {
	case f.truth <- c:
		return <-c
	case <-f.stopped:
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.final
	}
}

// Totals returns the simulator's own cumulative event counts summed over the fleet since start,
// restarts included (the true increase, which the pages' counters lose at a restart), as of the
// last publish. Keys are vLLM family names without "vllm:" and "_total": "prefix_cache_queries",
// "prefix_cache_hits", "num_preemptions", "prompt_tokens", "prompt_tokens_cached",
// "generation_tokens", "prompt_tokens_by_source/<source>", "request_success/<reason>", and
// "<histogram>_count" and "<histogram>_sum" for each histogram family (e.g.
// "time_to_first_token_seconds_sum"); on 0.20 pages "recomputed_token_executions", and with
// their flags "estimated_flops_per_gpu", "estimated_read_bytes_per_gpu",
// "estimated_write_bytes_per_gpu" and the KV block residency histograms' (see compute.go);
// plus "requests_lost" (requests dropped by restarts), "restarts", and "requests_aborted" and
// "aborted_prompt_tokens" (the requests the workload's client aborted and their prompt tokens,
// which no vLLM page counts: see WorkloadConfig.Abort). An SGLang fleet's are its pages' family names without "sglang:" and "_total", as
// SGLang counts: "prompt_tokens", "generation_tokens", "cached_tokens", "num_requests" (at each
// request's finish, aborted ones too), "num_aborted_requests", "num_retracted_requests", "realtime_tokens/<mode>", and "<histogram>_count"
// and "<histogram>_sum" of its four histograms; plus "requests_lost" and "restarts". A
// TensorRT-LLM fleet's are its pages' family names without "trtllm_" and "_total", counted at
// each request's finish as trtllm-serve logs them: "request_success/<reason>" (stop, length,
// cancelled), "prompt_tokens", "generation_tokens", "prompt_cached_tokens", "<histogram>_count"
// and "<histogram>_sum" of its seven latency histograms; plus "requests_aborted",
// "num_preemptions", "requests_lost" and "restarts".
func (f *Fleet) Totals() map[string]float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.totals)
}

// Close stops the simulation and every server and waits for their goroutines.
func (f *Fleet) Close() error {
	f.closeOnce.Do(func() {
		f.cancel()
		if f.router != nil {
			f.router.Stop(time.Second)
		}
		for _, s := range f.servers {
			s.Stop(time.Second, true)
		}
		f.wg.Wait()
		f.log.Info("fleet stopped")
	})
	return nil
}

// advance runs the simulation up to the wall clock's simulated time (the wall time since the
// start, less the time held). A fleet that waits for its driver goes a tick at a time and stops
// after the first tick that ends a batch or reaches an edge, so that it holds there even when it
// had fallen behind the wall clock.
func (f *Fleet) advance() {
	f.advancedAt = f.clock.Now()
	to := f.cfg.SimTime(f.advancedAt.Sub(f.start) - f.held)
	if !f.cfg.WaitForDriver {
		f.sim.AdvanceTo(to)
		return
	}
	tick := max(f.cfg.SimTime(f.cfg.Tick), time.Millisecond)
	for f.sim.Time < to && !f.sim.Pending(f.edges != nil) {
		f.sim.AdvanceTo(min(to, f.sim.Time+tick))
	}
}

// hold keeps the simulated time where it is until n calls of Resume came, answering the ground
// truth's requests meanwhile; it reports false when ctx ended first. The wall time from from
// (when the simulated time stopped) is left out of the simulated time after it, so the fleet
// goes on from where it stopped.
func (f *Fleet) hold(ctx context.Context, n int, from time.Time) bool {
	defer func() { f.held += f.clock.Now().Sub(from) }()
	for n > 0 {
		select {
		case <-ctx.Done():
			return false
		case c := <-f.truth:
			c <- f.sim.GroundTruth()
		case <-f.resume:
			n--
		}
	}
	return true
}

// run keeps the simulation at the wall clock's simulated time, publishing after each catch-up.
// A simulation slower than the wall clock falls behind and catches up as it can; its events stay
// the same, only their publication is late.
func (f *Fleet) run(ctx context.Context) {
	defer func() {
		g := f.sim.GroundTruth()
		f.mu.Lock()
		f.final = g
		f.mu.Unlock()
		close(f.stopped)
	}()
	// A fleet that waits for its driver first waits for the driver to be ready (its first
	// scrapes made): counts a page shows at a first scrape are its baseline, in no step.
	if f.cfg.WaitForDriver && !f.hold(ctx, 1, f.start) {
		return
	}
	var opsDone []chan struct{}
	for {
		f.advance()
		f.Publish()
		// The pages show what the calls did and what the requests generated before the callers
		// hear of it, so that a scrape right after the answer counts it.
		for _, c := range opsDone {
			close(c)
		}
		opsDone = opsDone[:0]
		for _, reply := range f.sim.TakeDriven() {
			reply()
		}
		delivered := 0
		for _, b := range f.sim.TakeBatches() {
			f.log.Info("batch done", "batch", b.N, "sim_time", b.At)
			select {
			case f.batches <- b.N:
				if f.edges == nil { // a colocated loop's driver goes by its edges
					delivered++
				}
			default:
				f.log.Warn("batch channel full, dropping", "batch", b.N)
			}
		}
		for _, e := range f.sim.TakeEdges() {
			f.log.Info("loop edge", "edge", e.Kind.String(), "step", e.Step, "sim_time", e.At)
			select {
			case f.edges <- e:
				delivered++
			default:
				if !f.edgesFull {
					f.edgesFull = true
					f.log.Warn("loop edge channel full, dropping edges", "edge", e.Kind.String(), "step", e.Step)
				}
				continue
			}
			f.edgesFull = false
		}
		if f.cfg.WaitForDriver && delivered > 0 && !f.hold(ctx, delivered, f.advancedAt) {
			return
		}
		for _, p := range f.sim.TakePublishes() {
			f.log.Info("policy published", "version", p.Version, "sim_time", p.At)
			select {
			case f.publishes <- p:
				f.publishesFull = false
			default:
				if !f.publishesFull {
					f.publishesFull = true
					f.log.Warn("publish channel full, dropping publishes", "version", p.Version)
				}
			}
		}
		tick := f.clock.NewTimer(f.cfg.Tick)
	wait:
		for {
			select {
			case <-ctx.Done():
				tick.Stop()
				return
			case c := <-f.truth:
				c <- f.sim.GroundTruth()
			case op := <-f.ops:
				f.advance()
				op.fn(f.sim)
				opsDone = append(opsDone, op.done)
				tick.Stop()
				break wait
			case <-tick.C():
				break wait
			}
		}
	}
}

func (f *Fleet) Publish() {
	for i, s := range f.servers {
		s.Publish(func(st *snap.PageState) { f.sim.FillPage(i, f.start, st) })
		if n := f.sim.Servers[i].Restarts; n != f.restarts[i] {
			f.restarts[i] = n
			f.log.Info("server restarted", "server", i, "restarts", n)
		}
	}
	t := f.sim.Totals()
	f.mu.Lock()
	f.totals = t
	f.mu.Unlock()
}

// fleetOp is a call of the HTTP side on the Sim: fn runs in the run goroutine at the simulated
// time of its arrival, and done is closed once the pages show its effect.
type fleetOp struct {
	fn   func(*fleetmodel.Sim)
	done chan struct{}
}

// do runs fn on the Sim in the run goroutine and returns once the pages show what it did.
func (f *Fleet) do(ctx context.Context, fn func(*fleetmodel.Sim)) error {
	op := fleetOp{fn, make(chan struct{})}
	select {
	case f.ops <- op:
	case <-f.stopped:
		return serve.ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-op.done:
		return nil
	case <-f.stopped:
		return serve.ErrStopped
	}
}
