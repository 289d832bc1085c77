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

	"github.com/vllmstat/vllmstat/internal/sim/routerpage"
)

// router is SGLang's router in front of an SGLang fleet (Config.Router): its /engine_metrics
// asks every server for its /metrics, as sgl-model-gateway does (core/worker_manager.rs,
// WorkerManager::get_engine_metrics; core/metrics_aggregator.rs, aggregate_metrics), and
// answers their pages merged as the router writes them (see mergeEnginePages). A server that
// does not answer 200, or whose page the router's parser rejects, is left out.
type Router struct {
	workers []string      // the servers' base URLs, which worker_addr holds
	answers atomic.Uint64 // pages answered: each one's families in another order
	client  *http.Client
	log     *slog.Logger
	srv     *http.Server
	addr    string
}

func NewRouter(ln net.Listener, workers []string, timeout time.Duration, log *slog.Logger) *Router {
	r := &Router{workers: workers, client: &http.Client{Timeout: timeout}, log: log.With("router", ln.Addr().String()), addr: ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /engine_metrics", r.handle)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: timeout + 10*time.Second,
		ErrorLog: slog.NewLogLogger(r.log.Handler(), slog.LevelDebug)}
	return r
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
