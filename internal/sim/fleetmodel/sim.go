// Package fleetmodel is a whole fleet's model without any I/O: its servers' engines, its
// workload, the colocated and async RL loops, restarts, and the requests and control calls of
// clients that drive it, all on one simulated clock. It renders pages only through the
// snap.PageRenderer it is given.
package fleetmodel

import (
	"slices"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// Sim is a whole fleet's model without any I/O: engines, workload and restarts on one simulated
// clock. It is deterministic: the same Config gives the same events at the same simulated times
// however AdvanceTo is called. Fleet runs one against the wall clock; tests drive it directly.
// It is not safe for concurrent use.
type Sim struct {
	Cfg     fleetconfig.Config
	release snap.Release // the vLLM release the pages are of
	buckets *snap.BucketSet
	Pages   snap.PageRenderer // writes the servers' pages; set by SetPages
	Servers []*simServer
	Engines []*core.Engine // all engines, server by server
	gen     *workload.Generator
	Time    time.Duration

	restarts []restartEvent // pending, in time order

	// GRPO batch state.
	batch       int           // number of the last batch submitted
	inFlight    bool          // a batch is being served
	nextBatchAt time.Duration // when the next batch arrives, if none is in flight
	done        []BatchDone   // finished batches not yet taken
	loop        loop          // the colocated loop, when the workload is one
	Async       asyncLoop     // the async loop, when the workload is one

	// sched is the trainer's timeline, shared with every engine's ledger; published counts its
	// publishes taken into effect, and publishes are those not yet taken by takePublishes.
	sched     *core.Schedule
	published int
	publishes []core.Publish

	onEvent func(core.Event)

	// drive is what clients sent over HTTP (see drive.go).
	Drive drive
}

// simServer is one API server's part of the model.
type simServer struct {
	Engines   []*core.Engine
	carry     []snap.EngineStats // per engine: counters of lives before the last restart
	startedAt time.Duration      // simulated time of the last (re)start
	Restarts  int
	lost      int64 // requests lost in restarts, all lives
}

type restartEvent struct {
	at     time.Duration
	server int
}

// BatchDone tells that GRPO batch N finished on every engine at simulated time At.
type BatchDone struct {
	N  int
	At time.Duration
}

// New builds the model of the fleet cfg describes, at simulated time 0, with no page writer.
func New(cfg fleetconfig.Config) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r, err := snap.ParseRelease(cfg.Version)
	if err != nil { // an SGLang fleet's version is no vLLM release
		r, _ = snap.ParseRelease("0.20")
	}
	s := &Sim{Cfg: cfg, release: r, buckets: snap.NewBucketSet(cfg.MaxModelLen), sched: &core.Schedule{}}
	ec := cfg.EngineConfig()
	for i := range cfg.Servers {
		srv := &simServer{carry: make([]snap.EngineStats, cfg.DP)}
		for j := range cfg.DP {
			e := core.NewEngineWithBuckets(ec, s.buckets)
			e.Server, e.Index = i, j
			e.Led.Sched = s.sched
			e.ShowsSleep = cfg.Engine != fleetconfig.EngineSGLang && cfg.Engine != fleetconfig.EngineTRTLLM && s.release.SleepState
			srv.Engines = append(srv.Engines, e)
			s.Engines = append(s.Engines, e)
		}
		s.Servers = append(s.Servers, srv)
	}
	s.Drive.init(len(s.Servers), len(s.Engines))
	for _, e := range s.Engines {
		e.Done = s.requestDone
	}
	if cfg.KVConnector {
		// Room for four times what the engines hold: a host-memory store is larger than HBM.
		ext := core.NewExternalCache(4 * cfg.BlocksPerEngine * len(s.Engines))
		for _, e := range s.Engines {
			e.Ext = ext
		}
	}
	w := cfg.Workload
	if w.Async {
		s.initAsync()
		w.StartDelay = s.Async.start
	}
	s.gen = workload.NewGenerator(w, len(s.Engines), cfg.MaxModelLen, cfg.Seed)
	s.nextBatchAt = w.StartDelay
	s.loop.state, s.loop.at = loopStart, cfg.Workload.StartDelay
	for _, f := range cfg.Faults {
		if f.Kind != fleetconfig.FaultRestart {
			continue
		}
		for i := range s.Servers {
			if f.Hits(i) {
				s.restarts = append(s.restarts, restartEvent{cfg.SimTime(f.At), i})
			}
		}
	}
	slices.SortStableFunc(s.restarts, func(a, b restartEvent) int { return int(a.at - b.at) })
	return s, nil
}

// OnEvent makes fn see every request event of every engine, in a deterministic order.
func (s *Sim) OnEvent(fn func(core.Event)) {
	s.onEvent = fn
	for _, e := range s.Engines {
		e.EventFn = fn
	}
}

// Now is the simulated time the model has been advanced to.
func (s *Sim) Now() time.Duration { return s.Time }

// AdvanceTo runs the model up to simulated time t: arrivals, iterations, finished batches and
// restarts. Engines whose last iteration started before t may end up a little past it.
func (s *Sim) AdvanceTo(t time.Duration) {
	for {
		at, kind, i := s.NextEvent()
		if kind == evNone || at > t {
			break
		}
		s.advance(at)
		switch kind {
		case evRestart:
			r := s.restarts[0]
			s.restarts = s.restarts[1:]
			s.Restart(r.server, r.at)
		case evPublish:
			s.asyncPublish()
		case EvSync:
			s.asyncSync(s.Engines[i])
		}
	}
	s.advance(t)
	s.Time = max(s.Time, t)
}

func (s *Sim) advance(t time.Duration) {
	s.advanceDriven(t)
	if s.Cfg.Workload.Kind == workload.WorkloadNone {
		s.runEngines(t)
		return
	}
	if s.Cfg.Workload.Colocated {
		s.advanceLoop(t)
		return
	}
	for {
		if s.Cfg.Workload.Kind == workload.WorkloadPoisson {
			for {
				rs, ok := s.gen.Poisson(t)
				if !ok {
					break
				}
				s.Engines[rs.Engine].Submit(rs.Spec)
			}
		} else if !s.inFlight && s.nextBatchAt <= t && (s.Cfg.Workload.Batches == 0 || s.batch < s.Cfg.Workload.Batches) {
			s.batch++
			s.inFlight = true
			s.submit(s.gen.Batch(s.batch, s.nextBatchAt))
		}
		s.runEngines(t)
		if !s.inFlight || !s.allIdle() {
			return
		}
		end := s.batchEnd(s.nextBatchAt)
		s.inFlight = false
		s.done = append(s.done, BatchDone{s.batch, end})
		if !s.Cfg.Workload.Async { // the async loop's steps end at its publishes
			s.sched.Ends = append(s.sched.Ends, end)
		}
		s.nextBatchAt = end + s.Cfg.Workload.Pause
		if s.nextBatchAt > t {
			return
		}
	}
}

func (s *Sim) submit(batch []workload.RoutedSpec) {
	for _, rs := range batch {
		s.Engines[rs.Engine].Submit(rs.Spec)
	}
}

func (s *Sim) runEngines(t time.Duration) {
	for _, e := range s.Engines {
		e.RunUntil(t)
	}
}

// batchEnd is the end of a batch that arrived at start and has finished: the batch is done
// when its last request finishes on any engine.
func (s *Sim) batchEnd(start time.Duration) time.Duration {
	end := start
	for _, e := range s.Engines {
		end = max(end, e.LastBusy)
	}
	return end
}

func (s *Sim) allIdle() bool {
	for _, e := range s.Engines {
		if e.Busy() || e.Pending() {
			return false
		}
	}
	return true
}

func (s *Sim) Restart(server int, at time.Duration) {
	srv := s.Servers[server]
	for i, e := range srv.Engines {
		srv.carry[i].AddCounters(&e.Stats)
		e.Time = max(e.Time, at)
		e.LastBusy = max(e.LastBusy, at)
		srv.lost += int64(e.Restart() + s.loseHeld(e))
	}
	srv.startedAt = at
	srv.Restarts++
}

// Pending reports whether the colocated loop reached an edge since the last TakeEdges (loop
// set), or a batch finished since the last TakeBatches.
func (s *Sim) Pending(loop bool) bool {
	if loop {
		return len(s.loop.edges) > 0
	}
	return len(s.done) > 0
}

// takeBatches returns the batches finished since the last call.
func (s *Sim) TakeBatches() []BatchDone {
	d := s.done
	s.done = nil
	return d
}

// Totals returns the model's own event counts summed over the fleet since time 0, restarts
// included; see Fleet.Totals for the keys.
func (s *Sim) Totals() map[string]float64 {
	m := map[string]float64{}
	for _, srv := range s.Servers {
		for i, e := range srv.Engines {
			switch s.Cfg.Engine {
			case fleetconfig.EngineSGLang:
				srv.carry[i].AddSGLangTotals(m)
				e.Stats.AddSGLangTotals(m)
				continue
			case fleetconfig.EngineTRTLLM:
				srv.carry[i].AddTRTLLMTotals(m)
				e.Stats.AddTRTLLMTotals(m)
				continue
			}
			srv.carry[i].AddTotals(m)
			e.Stats.AddTotals(m)
		}
		m["requests_lost"] += float64(srv.lost)
		m["restarts"] += float64(srv.Restarts)
	}
	s.addShapeTotals(m)
	return m
}

// SetPages sets the writer of the servers' pages that Page uses.
func (s *Sim) SetPages(w snap.PageRenderer) { s.Pages = w }

// Page renders server i's /metrics page as it is now with the writer SetPages set, taking the
// fleet to have started at Unix time start (which sets the _created timestamps) and counting no
// HTTP requests.
func (s *Sim) Page(i int, start time.Time) []byte {
	var st snap.PageState
	s.FillPage(i, start, &st)
	return s.Pages.Render(nil, &st)
}

// fillPage copies server i's engine stats into st, reusing st's slices.
func (s *Sim) FillPage(i int, start time.Time, st *snap.PageState) {
	srv := s.Servers[i]
	st.Engines = st.Engines[:0]
	for _, e := range srv.Engines {
		st.Engines = append(st.Engines, e.Stats)
		if s.Cfg.SGLangStageMetrics {
			e.SglangStageTimes(&st.Engines[len(st.Engines)-1].Sg, max(e.Led.Since, s.Time), s.Cfg.Speed)
		}
	}
	startedWall := start.Add(s.Cfg.WallTime(srv.startedAt))
	st.CreatedAt = float64(startedWall.UnixMicro()) / 1e6
	st.Uptime = s.Cfg.WallTime(s.Time - srv.startedAt).Seconds()
	st.Restarts = srv.Restarts
	st.Epoch, st.Speed = float64(start.UnixMicro())/1e6, s.Cfg.Speed
}
