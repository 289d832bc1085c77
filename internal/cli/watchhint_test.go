package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
)

// TestWatchHints: watch tells what a target's answer says of its setup as run does: a 404 (a
// server on the wrong port, or the URL's path not /metrics) gets the "wrong port or path?"
// hint, not "HTTP status 404" alone, and a page without any family vllmstat reads gets its own.
// Each is told once while it holds, with the target.
func TestWatchHints(t *testing.T) {
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("# TYPE http_requests_total counter\nhttp_requests_total 3\n"))
	}))
	defer other.Close()
	host := strings.TrimPrefix(notFound.URL, "http://")
	for _, tt := range []struct {
		name, target, url, hint string
	}{
		{"host:port", host, notFound.URL + "/metrics", page.HintNotFound},
		{"path", notFound.URL + "/v1", notFound.URL + "/v1", page.HintNotFound},
		{"no family", other.URL + "/metrics", other.URL + "/metrics", page.HintNoFamily},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := watchSession(t, []string{"--interval", "0.5", tt.target}, 3)
			if n := strings.Count(errs, tt.hint); n != 1 || !strings.Contains(errs, "target="+tt.url) {
				t.Errorf("stderr has the hint %d times, want once, for target %s:\n%s", n, tt.url, errs)
			}
		})
	}
}
