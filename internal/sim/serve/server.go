package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// server is one simulated API server's HTTP side. The fleet's simulation loop publishes the
// server's page state into it; handlers copy that state under mu and render outside the lock.
// Its faults (down, slow, garbage) act here, on the wall clock.
type Server struct {
	idx      int
	addr     string // host:port, fixed at the first listen so that a reopened port is the same
	renderer snap.PageRenderer
	clock    clock.Clock
	start    time.Time
	log      *slog.Logger
	slow     time.Duration   // delay of a slow answer
	done     <-chan struct{} // closed when the fleet stops, so that slow answers end at once

	faults  []fleetconfig.Fault // down, slow and garbage faults aimed at this server
	garbage []atomic.Bool       // per fault: the garbage answer was sent

	// versions is the engine whose version endpoint the server answers, if any, and model its
	// served model.
	versions   versionAPI
	versionTag string // Config.VersionTag
	model      string

	// drive runs a call on the Sim and returns once the pages show it (Fleet.do); driven says
	// that clients drive the engines (workload none), which opens the completion and control
	// endpoints, and engine is the fleet's engine, whose endpoints they are.
	Drive       func(ctx context.Context, fn func(*fleetmodel.Sim)) error
	driven      bool
	engine      string
	metricsPath string // where the page is served (Config.MetricsPath)
	maxModelLen int

	mu    sync.Mutex
	state snap.PageState // guarded by mu
	http  snap.HttpStats // guarded by mu; reset when the simulated process restarts

	srvMu   sync.Mutex
	httpSrv *http.Server // the one serving now, nil while down
	closed  bool         // the fleet is closing: serve no more
}

func NewServer(ctx context.Context, idx int, ln net.Listener, r snap.PageRenderer, cfg fleetconfig.Config, start time.Time, log *slog.Logger) *Server {
	s := &Server{idx: idx, addr: ln.Addr().String(), renderer: r, clock: cfg.Clock, start: start, done: ctx.Done(),
		log: log.With("server", idx, "addr", ln.Addr().String()), slow: cfg.SlowDelay, versions: versionAPIOf(cfg), versionTag: cfg.VersionTag, model: cfg.Model,
		driven: cfg.Workload.Kind == workload.WorkloadNone, engine: cfg.Engine, maxModelLen: cfg.MaxModelLen,
		metricsPath: cfg.MetricsPath()}
	for _, f := range cfg.Faults {
		if f.Kind != fleetconfig.FaultRestart && f.Hits(idx) {
			s.faults = append(s.faults, f)
		}
	}
	slices.SortStableFunc(s.faults, func(a, b fleetconfig.Fault) int { return int(a.At - b.At) })
	s.garbage = make([]atomic.Bool, len(s.faults))
	return s
}

// URL is the server's metrics endpoint: its Prometheus page.
func (s *Server) URL() string {
	host, port, _ := net.SplitHostPort(s.addr)
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + s.metricsPath
}

// publish replaces the page state with what fill writes. A new createdAt means the simulated
// process restarted, and the HTTP counters restart with it.
func (s *Server) Publish(fill func(st *snap.PageState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.state.CreatedAt
	fill(&s.state)
	if old != 0 && s.state.CreatedAt != old {
		s.http = snap.HttpStats{}
	}
}

// serve starts answering on ln; the goroutine belongs to wg.
func (s *Server) Serve(ln net.Listener, wg *sync.WaitGroup) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+s.metricsPath, s.handleMetrics)
	mux.HandleFunc("GET /health", s.handleHealth)
	s.handleVersions(mux)
	if s.driven {
		s.handleDriven(mux)
	}
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      s.slow + 10*time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.closed {
		ln.Close() // a down fault reopened the port while the fleet was closing
		return
	}
	s.httpSrv = hs
	wg.Go(func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("serve", "err", err)
		}
	})
}

// stop closes the listener and every connection, so that new connections are refused. It
// waits up to grace for handlers in flight. After a final stop, serve starts nothing.
func (s *Server) Stop(grace time.Duration, final bool) {
	s.srvMu.Lock()
	hs := s.httpSrv
	s.httpSrv = nil
	s.closed = s.closed || final
	s.srvMu.Unlock()
	if hs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		hs.Close()
	}
}

// runDownFaults takes the server's port away during each down fault's window and brings it
// back after, until ctx ends.
func (s *Server) RunDownFaults(ctx context.Context, wg *sync.WaitGroup) {
	for _, f := range s.faults {
		if f.Kind != fleetconfig.FaultDown {
			continue
		}
		if !s.sleepUntil(ctx, f.At) {
			return
		}
		s.Stop(0, false)
		s.log.Info("server down", "fault", f.String())
		if !s.sleepUntil(ctx, f.At+f.Duration) {
			return
		}
		for {
			ln, err := net.Listen("tcp", s.addr)
			if err == nil {
				s.Serve(ln, wg)
				s.log.Info("server up", "fault", f.String())
				break
			}
			s.log.Warn("reopen port", "err", err)
			retry := s.clock.NewTimer(100 * time.Millisecond)
			select {
			case <-ctx.Done():
				retry.Stop()
				return
			case <-retry.C():
			}
		}
	}
}

// sleepUntil waits until wall offset off from the start; false if ctx ended first.
func (s *Server) sleepUntil(ctx context.Context, off time.Duration) bool {
	d := off - s.clock.Now().Sub(s.start)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// wait holds a slow answer for s.slow; false when the client left or the fleet stopped first
// (then the answer is written).
func (s *Server) wait(ctx context.Context, w http.ResponseWriter) bool {
	t := s.clock.NewTimer(s.slow)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.done:
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return false
	case <-t.C():
		return true
	}
}

const garbagePage = `<!DOCTYPE html>
<html><head><title>502 Bad Gateway</title></head>
<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>
`

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	begin := s.clock.Now()
	off := begin.Sub(s.start)
	for i, f := range s.faults {
		switch {
		case f.Kind == fleetconfig.FaultGarbage && off >= f.At && s.garbage[i].CompareAndSwap(false, true):
			s.log.Info("answering garbage", "fault", f.String())
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, garbagePage)
			return
		case f.Kind == fleetconfig.FaultSlow && f.Within(off):
			if !s.wait(r.Context(), w) {
				return
			}
		}
	}
	s.mu.Lock()
	st := s.state
	st.Engines = slices.Clone(s.state.Engines)
	st.Http = s.http
	st.Http.Duration = snap.DynHistogram{}
	st.Http.Duration.CopyFrom(&s.http.Duration)
	s.mu.Unlock()

	page := s.renderer.Render(make([]byte, 0, 64<<10), &st)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(page)
	s.count(func(h *snap.HttpStats) { h.Metrics++ }, begin)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	s.count(func(h *snap.HttpStats) { h.Health++ }, s.clock.Now())
}

// count records a finished request the way the instrumentation does, after the response.
func (s *Server) count(inc func(*snap.HttpStats), begin time.Time) {
	d := s.clock.Now().Sub(begin).Seconds()
	s.mu.Lock()
	inc(&s.http)
	s.http.Duration.Observe(snap.HttpDurationBounds, d)
	s.mu.Unlock()
}
