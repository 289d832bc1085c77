package sim

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/sim/routerpage"
	"github.com/vllmstat/vllmstat/internal/sim/serve"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The router's /engine_metrics holds every server's page, each sample labelled worker_addr: read
// back, its workers are the servers' workers, one set per worker_addr, with the same counts.
func TestRouterEngineMetrics(t *testing.T) {
	cfg := simtest.SGLangConfig(2, 2)
	cfg.Port, cfg.Speed, cfg.Router = 0, 20, true
	cfg.Workload.Batches = 1
	f, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	select {
	case <-f.Batches():
	case <-time.After(time.Minute):
		t.Fatal("no batch finished")
	}
	if !strings.HasSuffix(f.RouterURL(), "/engine_metrics") {
		t.Fatalf("router URL %q", f.RouterURL())
	}
	// The batch is over: the pages hold still but for the idle log points' gauges.
	code, merged := simtest.Fetch(t, f.RouterURL())
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, merged)
	}
	mp, err := page.ParsePage(merged)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]page.EnginePage{}
	for _, u := range f.URLs() {
		_, body := simtest.Fetch(t, u)
		p, err := page.ParsePage(body)
		if err != nil {
			t.Fatal(err)
		}
		addr := `worker_addr="` + strings.TrimSuffix(u, "/metrics") + `"`
		for _, ep := range p.Engines {
			want[strings.TrimPrefix(ep.Labels+","+addr, ",")] = ep
		}
	}
	var got []string
	for _, ep := range mp.Engines {
		got = append(got, ep.Labels)
		w, ok := want[ep.Labels]
		if !ok || ep.Kind != vllm.SGLang {
			t.Errorf("worker %q (%v) is no server's", ep.Labels, ep.Kind)
			continue
		}
		for i := range ep.Counters {
			if c, wc := ep.Counters[i], w.Counters[i]; c.Family != wc.Family || c.Value != wc.Value || c.Reason != wc.Reason {
				t.Errorf("%q: counter %+v, the server's %+v", ep.Labels, c, wc)
			}
		}
		if len(ep.Counters) != len(w.Counters) || len(ep.Hists) != len(w.Hists) {
			t.Errorf("%q: %d counters %d histograms, the server's %d %d", ep.Labels, len(ep.Counters), len(ep.Hists), len(w.Counters), len(w.Hists))
			continue
		}
		// Every bucket read back (le="1" for the server's le="1.0"), its sum and count.
		for i := range ep.Hists {
			if h, wh := ep.Hists[i], w.Hists[i]; h.Family != wh.Family || !slices.Equal(h.Buckets, wh.Buckets) || h.Sum != wh.Sum || h.Count != wh.Count {
				t.Errorf("%q: histogram %+v, the server's %+v", ep.Labels, h, wh)
			}
		}
	}
	if len(got) != 6 || !slices.IsSorted(got) {
		t.Errorf("workers %q, want 2 servers' tokenizer and 2 DP ranks", got)
	}
	// The router's spelling: no ':' but in worker_addr, Rust's numbers, a blank line between
	// families.
	m := string(merged)
	if !strings.Contains(m, "# HELP sglang_num_running_reqs The number of running requests.\n") || !strings.Contains(m, "\n\n# HELP ") ||
		!strings.Contains(m, "\nsglang_num_running_reqs{dp_rank=\"0\",engine_type=\"unified\"") || strings.Contains(m, ".0\n") ||
		strings.Count(m, ":") != 2*strings.Count(m, `worker_addr="http://127.0.0.1:`) {
		t.Errorf("the merged page is not the router's:\n%.2000s", merged)
	}
	// The router's families come in another order at every answer (a HashMap's), which reads
	// the same.
	_, again := simtest.Fetch(t, f.RouterURL())
	if helps := func(b []byte) []string {
		var h []string
		for l := range strings.SplitSeq(string(b), "\n") {
			if strings.HasPrefix(l, "# HELP ") {
				h = append(h, l)
			}
		}
		return h
	}; slices.Equal(helps(merged), helps(again)) || !slices.Equal(slices.Sorted(slices.Values(helps(merged))), slices.Sorted(slices.Values(helps(again)))) {
		t.Error("two answers have their families in the same order, or not the same families")
	}
	p2, err := page.ParsePage(again)
	if err != nil || len(p2.Engines) != len(mp.Engines) {
		t.Fatalf("the second answer: %v, %d workers", err, len(p2.Engines))
	}
	for i, ep := range p2.Engines { // gauges aside: an idle log point may fall between the two
		if w := mp.Engines[i]; ep.Labels != w.Labels || !reflect.DeepEqual(ep.Counters, w.Counters) || !reflect.DeepEqual(ep.Hists, w.Hists) {
			t.Errorf("worker %q of the second answer reads otherwise", ep.Labels)
		}
	}
}

// One family whose label names differ between two servers (a DP server's dp_rank beside a
// server without DP) fails the router's whole page: aggregate_metrics' merge_family ensure!s
// equal label names, and get_engine_metrics answers 500 with the error.
func TestRouterLabelMismatch(t *testing.T) {
	page := func(labels string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "# HELP sglang:num_running_reqs The number of running requests.\n# TYPE sglang:num_running_reqs gauge\n"+
				"sglang:num_running_reqs{"+labels+"} 1.0\n")
		}
	}
	dp := httptest.NewServer(page(`dp_rank="0",model_name="m"`))
	defer dp.Close()
	plain := httptest.NewServer(page(`model_name="m"`))
	defer plain.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := serve.NewRouter(ln, []string{dp.URL, plain.URL}, 5*time.Second, slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	r.Serve(ln, &wg)
	defer wg.Wait()
	defer r.Stop(time.Second)
	code, body := simtest.Fetch(t, r.URL())
	want := `Failed to aggregate metrics: Label names should agree a=["dp_rank", "model_name", "worker_addr"] b=["model_name", "worker_addr"]`
	if code != http.StatusInternalServerError || string(body) != want {
		t.Errorf("status %d body %q, want 500 %q", code, body, want)
	}
	// The same servers' pages, each alone, merge.
	for _, u := range []string{dp.URL, plain.URL} {
		if _, err := routerpage.MergeEnginePages([]routerpage.MetricPack{{Addr: u, Page: []byte(fetchBody(t, u+"/metrics"))}}, 0); err != nil {
			t.Errorf("%s alone: %v", u, err)
		}
	}
}

func fetchBody(t *testing.T, url string) string {
	t.Helper()
	_, b := simtest.Fetch(t, url)
	return string(b)
}

// When no server answers a page the parser reads, the router answers 200 with an empty page:
// get_engine_metrics leaves failed servers out and aggregates what is left, nothing.
func TestRouterNoPages(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := serve.NewRouter(ln, []string{down.URL}, 5*time.Second, slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	r.Serve(ln, &wg)
	defer wg.Wait()
	defer r.Stop(time.Second)
	if code, body := simtest.Fetch(t, r.URL()); code != http.StatusOK || len(body) != 0 {
		t.Errorf("status %d body %q, want 200 and nothing", code, body)
	}
}
