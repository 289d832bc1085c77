package sim

import (
	"slices"
	"time"
)

// Sim is a whole fleet's model without any I/O: engines, workload and restarts on one simulated
// clock. It is deterministic: the same Config gives the same events at the same simulated times
// however AdvanceTo is called. Fleet runs one against the wall clock; tests drive it directly.
// It is not safe for concurrent use.
type Sim struct {
	cfg     Config
	release release // the vLLM release the pages are of
	buckets *bucketSet
	pages   pageRenderer // writes the servers' pages; set by SetPages
	servers []*simServer
	engines []*Engine // all engines, server by server
	gen     *generator
	now     time.Duration

	restarts []restartEvent // pending, in time order

	// GRPO batch state.
	batch       int           // number of the last batch submitted
	inFlight    bool          // a batch is being served
	nextBatchAt time.Duration // when the next batch arrives, if none is in flight
	done        []BatchDone   // finished batches not yet taken
	loop        loop          // the colocated loop, when the workload is one
	async       asyncLoop     // the async loop, when the workload is one

	// sched is the trainer's timeline, shared with every engine's ledger; published counts its
	// publishes taken into effect, and publishes are those not yet taken by takePublishes.
	sched     *schedule
	published int
	publishes []Publish

	onEvent func(Event)

	// drive is what clients sent over HTTP (see drive.go).
	drive drive
}

// simServer is one API server's part of the model.
type simServer struct {
	engines   []*Engine
	carry     []engineStats // per engine: counters of lives before the last restart
	startedAt time.Duration // simulated time of the last (re)start
	restarts  int
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
func New(cfg Config) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r, err := parseRelease(cfg.Version)
	if err != nil { // an SGLang fleet's version is no vLLM release
		r, _ = parseRelease("0.20")
	}
	s := &Sim{cfg: cfg, release: r, buckets: newBucketSet(cfg.MaxModelLen), sched: &schedule{}}
	ec := cfg.engineConfig()
	for i := range cfg.Servers {
		srv := &simServer{carry: make([]engineStats, cfg.DP)}
		for j := range cfg.DP {
			e := newEngine(ec, s.buckets)
			e.server, e.index = i, j
			e.led.sched = s.sched
			e.showsSleep = cfg.Engine != EngineSGLang && s.release.sleepState
			srv.engines = append(srv.engines, e)
			s.engines = append(s.engines, e)
		}
		s.servers = append(s.servers, srv)
	}
	s.drive.init(len(s.engines))
	for _, e := range s.engines {
		e.done = s.requestDone
	}
	if cfg.KVConnector {
		// Room for four times what the engines hold: a host-memory store is larger than HBM.
		ext := newExternalCache(4 * cfg.BlocksPerEngine * len(s.engines))
		for _, e := range s.engines {
			e.ext = ext
		}
	}
	w := cfg.Workload
	if w.Async {
		s.initAsync()
		w.StartDelay = s.async.start
	}
	s.gen = newGenerator(w, len(s.engines), cfg.MaxModelLen, cfg.Seed)
	s.nextBatchAt = w.StartDelay
	s.loop.state, s.loop.at = loopStart, cfg.Workload.StartDelay
	for _, f := range cfg.Faults {
		if f.Kind != FaultRestart {
			continue
		}
		for i := range s.servers {
			if f.hits(i) {
				s.restarts = append(s.restarts, restartEvent{cfg.simTime(f.At), i})
			}
		}
	}
	slices.SortStableFunc(s.restarts, func(a, b restartEvent) int { return int(a.at - b.at) })
	return s, nil
}

// OnEvent makes fn see every request event of every engine, in a deterministic order.
func (s *Sim) OnEvent(fn func(Event)) {
	s.onEvent = fn
	for _, e := range s.engines {
		e.onEvent = fn
	}
}

// Now is the simulated time the model has been advanced to.
func (s *Sim) Now() time.Duration { return s.now }

// AdvanceTo runs the model up to simulated time t: arrivals, iterations, finished batches and
// restarts. Engines whose last iteration started before t may end up a little past it.
func (s *Sim) AdvanceTo(t time.Duration) {
	for {
		at, kind, i := s.nextEvent()
		if kind == evNone || at > t {
			break
		}
		s.advance(at)
		switch kind {
		case evRestart:
			r := s.restarts[0]
			s.restarts = s.restarts[1:]
			s.restart(r.server, r.at)
		case evPublish:
			s.asyncPublish()
		case evSync:
			s.asyncSync(s.engines[i])
		}
	}
	s.advance(t)
	s.now = max(s.now, t)
}

func (s *Sim) advance(t time.Duration) {
	s.advanceDriven(t)
	if s.cfg.Workload.Kind == WorkloadNone {
		s.runEngines(t)
		return
	}
	if s.cfg.Workload.Colocated {
		s.advanceLoop(t)
		return
	}
	for {
		if s.cfg.Workload.Kind == WorkloadPoisson {
			for {
				rs, ok := s.gen.poisson(t)
				if !ok {
					break
				}
				s.engines[rs.engine].Submit(rs.spec)
			}
		} else if !s.inFlight && s.nextBatchAt <= t && (s.cfg.Workload.Batches == 0 || s.batch < s.cfg.Workload.Batches) {
			s.batch++
			s.inFlight = true
			s.submit(s.gen.batch(s.batch, s.nextBatchAt))
		}
		s.runEngines(t)
		if !s.inFlight || !s.allIdle() {
			return
		}
		end := s.batchEnd(s.nextBatchAt)
		s.inFlight = false
		s.done = append(s.done, BatchDone{s.batch, end})
		if !s.cfg.Workload.Async { // the async loop's steps end at its publishes
			s.sched.ends = append(s.sched.ends, end)
		}
		s.nextBatchAt = end + s.cfg.Workload.Pause
		if s.nextBatchAt > t {
			return
		}
	}
}

func (s *Sim) submit(batch []routedSpec) {
	for _, rs := range batch {
		s.engines[rs.engine].Submit(rs.spec)
	}
}

func (s *Sim) runEngines(t time.Duration) {
	for _, e := range s.engines {
		e.RunUntil(t)
	}
}

// batchEnd is the end of a batch that arrived at start and has finished: the batch is done
// when its last request finishes on any engine.
func (s *Sim) batchEnd(start time.Duration) time.Duration {
	end := start
	for _, e := range s.engines {
		end = max(end, e.lastBusy)
	}
	return end
}

func (s *Sim) allIdle() bool {
	for _, e := range s.engines {
		if e.Busy() || e.Pending() {
			return false
		}
	}
	return true
}

func (s *Sim) restart(server int, at time.Duration) {
	srv := s.servers[server]
	for i, e := range srv.engines {
		srv.carry[i].addCounters(&e.stats)
		e.now = max(e.now, at)
		e.lastBusy = max(e.lastBusy, at)
		srv.lost += int64(e.restart() + s.loseHeld(e))
	}
	srv.startedAt = at
	srv.restarts++
}

// takeBatches returns the batches finished since the last call.
func (s *Sim) takeBatches() []BatchDone {
	d := s.done
	s.done = nil
	return d
}

// Totals returns the model's own event counts summed over the fleet since time 0, restarts
// included; see Fleet.Totals for the keys.
func (s *Sim) Totals() map[string]float64 {
	m := map[string]float64{}
	for _, srv := range s.servers {
		for i, e := range srv.engines {
			if s.cfg.Engine == EngineSGLang {
				srv.carry[i].addSGLangTotals(m)
				e.stats.addSGLangTotals(m)
				continue
			}
			srv.carry[i].addTotals(m)
			e.stats.addTotals(m)
		}
		m["requests_lost"] += float64(srv.lost)
		m["restarts"] += float64(srv.restarts)
	}
	s.addShapeTotals(m)
	return m
}

// SetPages sets the writer of the servers' pages that Page uses.
func (s *Sim) SetPages(w pageRenderer) { s.pages = w }

// Page renders server i's /metrics page as it is now with the writer SetPages set, taking the
// fleet to have started at Unix time start (which sets the _created timestamps) and counting no
// HTTP requests.
func (s *Sim) Page(i int, start time.Time) []byte {
	var st pageState
	s.fillPage(i, start, &st)
	return s.pages.render(nil, &st)
}

// fillPage copies server i's engine stats into st, reusing st's slices.
func (s *Sim) fillPage(i int, start time.Time, st *pageState) {
	srv := s.servers[i]
	st.engines = st.engines[:0]
	for _, e := range srv.engines {
		st.engines = append(st.engines, e.stats)
		if s.cfg.SGLangStageMetrics {
			e.sglangStageTimes(&st.engines[len(st.engines)-1].sg, max(e.led.since, s.now), s.cfg.Speed)
		}
	}
	startedWall := start.Add(s.cfg.wallTime(srv.startedAt))
	st.createdAt = float64(startedWall.UnixMicro()) / 1e6
	st.uptime = s.cfg.wallTime(s.now - srv.startedAt).Seconds()
	st.restarts = srv.restarts
	st.epoch, st.speed = float64(start.UnixMicro())/1e6, s.cfg.Speed
}
