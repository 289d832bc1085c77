package sim

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

func fetchPage(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// The router's /engine_metrics holds every server's page, each sample labelled worker_addr: read
// back, its workers are the servers' workers, one set per worker_addr, with the same counts.
func TestRouterEngineMetrics(t *testing.T) {
	cfg := sglangConfig(2, 2)
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
	code, merged := fetchPage(t, f.RouterURL())
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, merged)
	}
	mp, err := page.ParsePage(merged)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]page.EnginePage{}
	for _, u := range f.URLs() {
		_, body := fetchPage(t, u)
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
		}
	}
	if len(got) != 6 || !slices.IsSorted(got) {
		t.Errorf("workers %q, want 2 servers' tokenizer and 2 DP ranks", got)
	}
	if !strings.Contains(string(merged), "sglang:num_running_reqs{dp_rank=\"0\",engine_type=\"unified\"") || strings.Contains(string(merged), ".0\n") {
		t.Errorf("the merged page does not keep SGLang's names or writes Python's numbers:\n%.2000s", merged)
	}
}

// The merged page holds every page that is Prometheus text, each sample labelled with its
// server, numbers as Rust prints them; a page that is not is left out.
func TestMergeEnginePages(t *testing.T) {
	a := metricPack{"http://a:1", []byte("# HELP x:y X.\n# TYPE x:y gauge\nx:y{m=\"1\"} 2.0\nx:y 3.5\n")}
	b := metricPack{"http://b:1", []byte("# HELP x:y X.\n# TYPE x:y gauge\nx:y{m=\"1\"} 1e+06\n# HELP a:b A.\n# TYPE a:b counter\na:b_total 7.0\n")}
	bad := metricPack{"http://c:1", []byte("<html>502</html>")}
	got := string(mergeEnginePages([]metricPack{a, bad, b}))
	want := `# HELP a:b A.
# TYPE a:b counter
a:b_total{worker_addr="http://b:1"} 7
# HELP x:y X.
# TYPE x:y gauge
x:y{m="1",worker_addr="http://a:1"} 2
x:y{worker_addr="http://a:1"} 3.5
x:y{m="1",worker_addr="http://b:1"} 1000000
`
	if got != want {
		t.Errorf("merged:\n%s\nwant:\n%s", got, want)
	}
}
