package serve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/routerpage"
)

// Router is SGLang's router in front of an SGLang fleet (Config.Router). Its /engine_metrics
// asks every server for its /metrics, as sgl-model-gateway does (core/worker_manager.rs,
// WorkerManager::get_engine_metrics; core/metrics_aggregator.rs, aggregate_metrics), and
// answers their pages merged as the router writes them (see mergeEnginePages). A server that
// does not answer 200, or whose page the router's parser rejects, is left out. Its /generate,
// /v1/completions and /v1/chat/completions go to one server each, chosen by its policy, with
// the router's retries (see routerforward.go); its /metrics is its own (routerpage.Metrics).
type Router struct {
	workers []string      // the servers' base URLs, which worker_addr holds
	answers atomic.Uint64 // pages answered: each one's families in another order
	client  *http.Client  // for the servers' pages
	relay   *http.Client  // for the requests it routes, which take as long as a rollout
	log     *slog.Logger
	srv     *http.Server
	addr    string
	clock   clock.Clock
	policy  routerPolicy
	metrics *routerpage.Metrics
}

// NewRouter returns a router of workers (base URLs) listening on ln, routing round robin on
// the real clock until Route says otherwise; timeout bounds each server's page.
func NewRouter(ln net.Listener, workers []string, timeout time.Duration, log *slog.Logger) *Router {
	r := &Router{workers: workers, client: &http.Client{Timeout: timeout}, relay: &http.Client{},
		log: log.With("router", ln.Addr().String()), addr: ln.Addr().String(), clock: clock.Real{},
		policy: newRouterPolicy(fleetconfig.RouterRoundRobin, len(workers)), metrics: routerpage.NewMetrics()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /engine_metrics", r.counted("/engine_metrics", r.handle))
	mux.HandleFunc("GET /metrics", r.handleMetrics)
	for _, route := range []string{"/generate", "/v1/completions", "/v1/chat/completions"} {
		mux.HandleFunc("POST "+route, r.counted(route, r.routed(route)))
	}
	mux.HandleFunc("GET /v1/models", r.counted("/v1/models", r.handleModels))
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: timeout + 10*time.Second,
		ErrorLog: slog.NewLogLogger(r.log.Handler(), slog.LevelDebug)}
	return r
}

// Route sets the router's policy (fleetconfig.RouterRoundRobin or RouterCacheAware) and the
// clock its retries wait and its durations are measured by. Call it before Serve.
func (r *Router) Route(policy string, c clock.Clock) {
	r.policy = newRouterPolicy(policy, len(r.workers))
	r.clock = c
}

// URL is the router's merged page.
func (r *Router) URL() string {
	host, port, _ := net.SplitHostPort(r.addr)
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/engine_metrics"
}

func (r *Router) Serve(ln net.Listener, wg *sync.WaitGroup) {
	wg.Go(func() {
		if err := r.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("serve", "err", err)
		}
	})
}

func (r *Router) Stop(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil {
		r.srv.Close()
	}
}

func (r *Router) handle(w http.ResponseWriter, req *http.Request) {
	pages := make([][]byte, len(r.workers))
	var wg sync.WaitGroup
	for i, u := range r.workers {
		wg.Go(func() {
			greq, err := http.NewRequestWithContext(req.Context(), http.MethodGet, u+"/metrics", nil)
			if err != nil {
				return
			}
			resp, err := r.client.Do(greq)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			if b, err := io.ReadAll(resp.Body); err == nil && resp.StatusCode == http.StatusOK {
				pages[i] = b
			}
		})
	}
	wg.Wait()
	var packs []routerpage.MetricPack
	for i, p := range pages {
		if p != nil {
			packs = append(packs, routerpage.MetricPack{Addr: r.workers[i], Page: p})
		}
	}
	// get_engine_metrics (core/worker_manager.rs): the pages that came back are aggregated,
	// none giving an empty page; an error of the aggregation fails the whole answer.
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	m, err := routerpage.MergeEnginePages(packs, r.answers.Add(1))
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "Failed to aggregate metrics: "+err.Error())
		return
	}
	w.Write(m)
}
