package sim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// router is SGLang's router in front of an SGLang fleet (Config.Router): its /engine_metrics
// asks every server for its /metrics, as sgl-router does (WorkerManager.get_engine_metrics,
// aggregate_metrics), and answers their pages merged: every sample labelled worker_addr with
// the server's URL, the families of one name together, the numbers as Rust prints them. A
// server that does not answer 200 is left out, as the router leaves it.
type router struct {
	workers []string // the servers' base URLs, which worker_addr holds
	client  *http.Client
	log     *slog.Logger
	srv     *http.Server
	addr    string
}

func newRouter(ln net.Listener, workers []string, timeout time.Duration, log *slog.Logger) *router {
	r := &router{workers: workers, client: &http.Client{Timeout: timeout}, log: log.With("router", ln.Addr().String()), addr: ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /engine_metrics", r.handle)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: timeout + 10*time.Second,
		ErrorLog: slog.NewLogLogger(r.log.Handler(), slog.LevelDebug)}
	return r
}

// URL is the router's merged page.
func (r *router) URL() string {
	host, port, _ := net.SplitHostPort(r.addr)
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/engine_metrics"
}

func (r *router) serve(ln net.Listener, wg *sync.WaitGroup) {
	wg.Go(func() {
		if err := r.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("serve", "err", err)
		}
	})
}

func (r *router) stop(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil {
		r.srv.Close()
	}
}

func (r *router) handle(w http.ResponseWriter, req *http.Request) {
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
	var packs []metricPack
	for i, p := range pages {
		if p != nil {
			packs = append(packs, metricPack{addr: r.workers[i], page: p})
		}
	}
	if len(packs) == 0 {
		http.Error(w, "All backend requests failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(mergeEnginePages(packs))
}

// metricPack is one server's page and its address.
type metricPack struct {
	addr string
	page []byte
}

// mergeEnginePages merges servers' pages as the router does: each family once, by name, with
// every server's samples in the servers' order, each labelled worker_addr; families in name
// order. A page that is not Prometheus text in prometheus_client's layout (a HELP and a TYPE
// line before each family's samples) is left out whole.
func mergeEnginePages(packs []metricPack) []byte {
	merged := map[string]*packFamily{}
	for _, p := range packs {
		fams, ok := readPack(p)
		if !ok {
			continue
		}
		for _, f := range fams {
			if m := merged[f.name]; m != nil {
				m.samples = append(m.samples, f.samples...)
			} else {
				merged[f.name] = &f
			}
		}
	}
	var b bytes.Buffer
	for _, n := range slices.Sorted(maps.Keys(merged)) {
		f := merged[n]
		b.WriteString("# HELP " + n + " " + f.help + "\n")
		b.WriteString("# TYPE " + n + " " + f.typ + "\n")
		for _, s := range f.samples {
			b.WriteString(s + "\n")
		}
	}
	return b.Bytes()
}

// packFamily is one family of a server's page: its HELP and TYPE, and its sample lines.
type packFamily struct {
	name, help, typ string
	samples         []string
}

// readPack reads a server's page into its families, each sample labelled with the server's
// address; ok is false for a page in another layout.
func readPack(p metricPack) (fams []packFamily, ok bool) {
	for line := range strings.SplitSeq(strings.TrimSuffix(string(p.page), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(line[len("# HELP "):], " ")
			fams = append(fams, packFamily{name: name, help: help})
		case strings.HasPrefix(line, "# TYPE "):
			if len(fams) == 0 {
				return nil, false
			}
			_, fams[len(fams)-1].typ, _ = strings.Cut(line[len("# TYPE "):], " ")
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			s, good := withWorkerAddr(line, p.addr)
			if len(fams) == 0 || !good {
				return nil, false
			}
			fams[len(fams)-1].samples = append(fams[len(fams)-1].samples, s)
		}
	}
	return fams, true
}

// withWorkerAddr adds worker_addr to a sample line's labels and writes its value as Rust
// prints an f64; ok is false for a line that is not a sample.
func withWorkerAddr(line, addr string) (string, bool) {
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return line, false
	}
	head, val := line[:sp], line[sp+1:]
	v, err := strconv.ParseFloat(val, 64)
	if err != nil {
		return line, false
	}
	label := `worker_addr="` + addr + `"`
	if strings.HasSuffix(head, "}") {
		if strings.HasSuffix(head, "{}") {
			head = head[:len(head)-1] + label + "}"
		} else {
			head = head[:len(head)-1] + "," + label + "}"
		}
	} else {
		head += "{" + label + "}"
	}
	return head + " " + rustFloat(v), true
}

// rustFloat formats v as Rust's Display does: the shortest decimal that reads back as v,
// without an exponent, "inf", "-inf" and "NaN" for the others.
func rustFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
