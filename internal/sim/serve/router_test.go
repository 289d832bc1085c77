package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/serve"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// worker is a stand-in server that answers every request with status and a body naming it,
// counting the requests it got.
type worker struct {
	*httptest.Server
	hits atomic.Int64
}

func newWorker(t *testing.T, name string, status int) *worker {
	w := &worker{}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(status)
		json.NewEncoder(rw).Encode(map[string]string{"worker": name, "path": r.URL.Path, "body": string(body)})
	}))
	t.Cleanup(w.Close)
	return w
}

// startRouter serves a round-robin router of workers on a fake clock that a goroutine moves
// on whenever the router waits to retry, and returns its base URL.
func startRouter(t *testing.T, workers ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := serve.NewRouter(ln, workers, 5*time.Second, slog.New(slog.DiscardHandler))
	fake := clock.NewFake(time.Unix(1000, 0))
	r.Route(fleetconfig.RouterRoundRobin, fake)
	var wg sync.WaitGroup
	r.Serve(ln, &wg)
	ctx, cancel := context.WithCancel(context.Background())
	wg.Go(func() {
		for fake.BlockUntil(ctx, 1) == nil {
			fake.Advance(time.Second) // past every backoff of the first retries
		}
	})
	t.Cleanup(func() {
		r.Stop(time.Second)
		cancel()
		wg.Wait()
	})
	return strings.TrimSuffix(r.URL(), "/engine_metrics")
}

// routerMetric sums the samples of name on the router's /metrics whose labels hold match.
func routerMetric(t *testing.T, base, name string, match map[string]string) float64 {
	t.Helper()
	var v float64
	for _, m := range simtest.ParsePage(t, []byte(simtest.MustGet(t, base+"/metrics")))[name].GetMetric() {
		n := 0
		for _, l := range m.Label {
			if want, ok := match[l.GetName()]; ok && want == l.GetValue() {
				n++
			}
		}
		if n != len(match) {
			continue
		}
		if m.Counter != nil {
			v += m.Counter.GetValue()
		} else {
			v += float64(m.Histogram.GetSampleCount())
		}
	}
	return v
}

type wantMetric struct {
	name  string
	match map[string]string
	value float64
}

func checkMetrics(t *testing.T, base string, want []wantMetric) {
	t.Helper()
	for _, w := range want {
		if got := routerMetric(t, base, w.name, w.match); got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.match, got, w.value)
		}
	}
}

// A worker's retryable answer (503) is tried again on the worker the policy chooses next; the
// client gets that worker's answer, and the router counts the retry and the failure.
func TestRouterRetriesOnTheNextWorker(t *testing.T) {
	bad, good := newWorker(t, "bad", http.StatusServiceUnavailable), newWorker(t, "good", http.StatusOK)
	base := startRouter(t, bad.URL, good.URL)
	code, body := simtest.Post(t, base+"/v1/completions", `{"model": "m", "prompt": "hi", "stream": true}`)
	if code != http.StatusOK || !strings.Contains(body, `"worker":"good"`) || !strings.Contains(body, `"path":"/v1/completions"`) ||
		!strings.Contains(body, `\"prompt\": \"hi\"`) {
		t.Errorf("answered %d %s, want the good worker's answer to the same request", code, body)
	}
	if bad.hits.Load() != 1 || good.hits.Load() != 1 {
		t.Errorf("the workers got %d and %d requests, want 1 each", bad.hits.Load(), good.hits.Load())
	}
	checkMetrics(t, base, []wantMetric{
		{"smg_router_requests_total", map[string]string{"model": "m", "endpoint": "completions", "streaming": "true"}, 1},
		{"smg_worker_selection_total", map[string]string{"policy": "round_robin", "model": "m"}, 2},
		{"smg_worker_retries_total", map[string]string{"endpoint": "completions", "worker_type": "regular"}, 1},
		{"smg_worker_errors_total", map[string]string{"error_type": "backend_error"}, 1},
		{"smg_worker_cb_outcomes_total", map[string]string{"worker": bad.URL, "outcome": "failure"}, 1},
		{"smg_worker_cb_outcomes_total", map[string]string{"worker": good.URL, "outcome": "success"}, 1},
		{"smg_router_request_duration_seconds", map[string]string{"endpoint": "completions"}, 1},
		{"smg_router_request_errors_total", nil, 0},
		{"smg_worker_retries_exhausted_total", nil, 0},
	})
}

// After five attempts the router gives up and relays the last answer, as it came; a status it
// retries is counted as no router error, even then.
func TestRouterRetriesExhausted(t *testing.T) {
	a, b := newWorker(t, "a", http.StatusServiceUnavailable), newWorker(t, "b", http.StatusServiceUnavailable)
	base := startRouter(t, a.URL, b.URL)
	code, body := simtest.Post(t, base+"/generate", `{"text": "hi"}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"worker":"a"`) {
		t.Errorf("answered %d %s, want the fifth attempt's answer, worker a's 503", code, body)
	}
	if a.hits.Load() != 3 || b.hits.Load() != 2 {
		t.Errorf("the workers got %d and %d requests, want 3 and 2", a.hits.Load(), b.hits.Load())
	}
	checkMetrics(t, base, []wantMetric{
		{"smg_worker_retries_total", map[string]string{"endpoint": "generate"}, 4},
		{"smg_worker_retries_exhausted_total", map[string]string{"endpoint": "generate"}, 1},
		{"smg_worker_errors_total", map[string]string{"error_type": "backend_error"}, 5},
		{"smg_router_request_errors_total", nil, 0},
		{"smg_router_request_duration_seconds", nil, 0},
	})
}

// A status the router does not retry (400) is relayed at once and counted as a router error of
// its type; a worker that cannot be reached answers the router's 500, which is retried.
func TestRouterRelaysErrors(t *testing.T) {
	refusing := newWorker(t, "gone", http.StatusOK)
	refusing.Close()
	invalid := newWorker(t, "invalid", http.StatusBadRequest)
	base := startRouter(t, refusing.URL, invalid.URL)
	code, body := simtest.Post(t, base+"/v1/chat/completions", `{"model": "m", "messages": [{"role": "user", "content": "hi"}]}`)
	if code != http.StatusBadRequest || !strings.Contains(body, `"worker":"invalid"`) {
		t.Errorf("answered %d %s, want the second worker's 400 after the first could not be reached", code, body)
	}
	checkMetrics(t, base, []wantMetric{
		{"smg_router_request_errors_total", map[string]string{"endpoint": "chat", "model": "m", "error_type": "validation_error"}, 1},
		{"smg_worker_errors_total", map[string]string{"error_type": "backend_error"}, 1},
		{"smg_worker_retries_total", map[string]string{"endpoint": "chat"}, 1},
		{"smg_worker_cb_outcomes_total", map[string]string{"worker": refusing.URL, "outcome": "failure"}, 1},
		{"smg_worker_cb_outcomes_total", map[string]string{"worker": invalid.URL, "outcome": "failure"}, 1},
	})

	// Nobody answers: five attempts, then the router's own 500.
	base = startRouter(t, refusing.URL)
	code, body = simtest.Post(t, base+"/generate", `{"text": "hi"}`)
	var e struct {
		Error struct{ Type, Code, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusInternalServerError ||
		e.Error.Type != "internal_server_error" || e.Error.Code != "call_upstream_request_error" || !strings.Contains(e.Error.Message, refusing.URL+"/generate") {
		t.Errorf("answered %d %s (%v), want the router's 500 naming the worker", code, body, err)
	}
	checkMetrics(t, base, []wantMetric{{"smg_worker_retries_exhausted_total", nil, 1}})
}

// What the router's JSON extractor refuses reaches no worker; /v1/models is the first
// worker's.
func TestRouterRefusesBeforeRouting(t *testing.T) {
	w := newWorker(t, "w", http.StatusOK)
	base := startRouter(t, w.URL)
	resp, err := http.Post(base+"/generate", "text/plain", strings.NewReader(`{"text": "hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a body without a JSON content type: %d, want 415", resp.StatusCode)
	}
	if code, _ := simtest.Post(t, base+"/generate", `{"text": `); code != http.StatusBadRequest {
		t.Errorf("a body that is not JSON: %d, want 400", code)
	}
	if w.hits.Load() != 0 {
		t.Errorf("the worker got %d requests, want none", w.hits.Load())
	}
	if code, body := simtest.Fetch(t, base+"/v1/models"); code != http.StatusOK || !strings.Contains(string(body), `"path":"/v1/models"`) {
		t.Errorf("/v1/models answered %d %s, want the worker's answer", code, body)
	}
	checkMetrics(t, base, []wantMetric{
		{"smg_router_requests_total", nil, 0},
		{"smg_http_requests_total", map[string]string{"method": "POST", "path": "/generate"}, 2},
		{"smg_http_requests_total", map[string]string{"method": "GET", "path": "/v1/models"}, 1},
	})
}
