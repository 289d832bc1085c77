package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/collector"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/target"
)

// runCollector runs a real collector with static targets until the test ends.
func runCollector(t *testing.T, static ...string) *collector.Collector {
	t.Helper()
	var ts []target.Target
	for _, u := range static {
		ts = append(ts, target.Target{URL: u})
	}
	c := collector.New(collector.Options{Options: scrape.Options{Timeout: 5 * time.Second}, Targets: ts, Interval: time.Hour, NoFinalStep: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return c
}

// targetList makes a request that answers with the target list, and returns it sorted.
func targetList(t *testing.T, h http.Handler, method, body string) []string {
	t.Helper()
	code, b := do(t, h, method, "/v1/targets", body, "")
	if code != http.StatusOK {
		t.Fatalf("%s /v1/targets: status %d: %v", method, code, b)
	}
	var out []string
	for _, u := range b["targets"].([]any) {
		out = append(out, u.(string))
	}
	slices.Sort(out)
	return out
}

// TestAdditiveTargets: workers register their own URL at the same time with POST and leave
// with DELETE; none of them undoes another's registration, and the configured target stays.
func TestAdditiveTargets(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "vllm:num_requests_running 1")
	}))
	defer page.Close()
	static := page.URL + "/metrics"
	h := New(Options{Collector: runCollector(t, static)})

	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"targets": ["HTTP://u:pw@127.0.0.1:%d/metrics"]}`, 20000+i)
			if code, b := do(t, h, "POST", "/v1/targets", body, ""); code != http.StatusOK {
				t.Errorf("POST %d: %d %v", i, code, b)
			}
		}()
	}
	wg.Wait()
	got := targetList(t, h, "GET", "")
	if len(got) != n+1 || !slices.Contains(got, static) {
		t.Fatalf("after %d registrations: %v", n, got)
	}
	for _, u := range got {
		if strings.Contains(u, "pw") || strings.Contains(u, "u:") {
			t.Fatalf("target %q shows its credentials", u)
		}
	}

	// Adding again changes nothing; removing twice is not an error.
	got = targetList(t, h, "POST", `{"targets": ["http://127.0.0.1:20000/metrics"]}`)
	if len(got) != n+1 {
		t.Fatalf("a repeated POST changed the targets: %v", got)
	}
	for range 2 {
		got = targetList(t, h, "DELETE", `{"targets": ["http://127.0.0.1:20001/metrics", "http://127.0.0.1:1/metrics"]}`)
		if len(got) != n || slices.Contains(got, "http://127.0.0.1:20001/metrics") {
			t.Fatalf("after DELETE: %v", got)
		}
	}

	// PUT still replaces the whole static list.
	got = targetList(t, h, "PUT", `{"targets": ["http://127.0.0.1:20002/metrics"]}`)
	if !slices.Equal(got, []string{"http://127.0.0.1:20002/metrics"}) {
		t.Fatalf("PUT answered %v", got)
	}
	got = targetList(t, h, "GET", "")
	if !slices.Equal(got, []string{"http://127.0.0.1:20002/metrics"}) {
		t.Fatalf("after PUT: %v", got)
	}

	// The same rules as PUT: bad URLs are 400 and change nothing.
	if code, b := do(t, h, "POST", "/v1/targets", `{"targets": ["ftp://x/metrics"]}`, ""); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(b["error"]), "only http and https") {
		t.Fatalf("POST of an ftp URL: %d %v", code, b)
	}
	if code, b := do(t, h, "DELETE", "/v1/targets", `{}`, ""); code != http.StatusBadRequest {
		t.Fatalf("DELETE without targets: %d %v", code, b)
	}
}

// TestAdditiveTargetsNeedToken: POST and DELETE are guarded like PUT.
func TestAdditiveTargetsNeedToken(t *testing.T) {
	h := New(Options{Collector: runCollector(t), Token: "s3cret"})
	for _, m := range []string{"POST", "DELETE"} {
		if code, _ := do(t, h, m, "/v1/targets", `{"targets": ["http://127.0.0.1:1/metrics"]}`, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d", m, code)
		}
		if code, b := do(t, h, m, "/v1/targets", `{"targets": ["http://127.0.0.1:1/metrics"]}`, "s3cret"); code != http.StatusOK {
			t.Errorf("%s with the token: %d %v", m, code, b)
		}
	}
}
