package scrape

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/target"
)

// TestFetchWorkerLabels: a Ray metrics-agent page with two replicas, both engine="0", is two
// workers by default and one without worker labels; the workers limit counts workers so.
func TestFetchWorkerLabels(t *testing.T) {
	body, err := os.ReadFile("../page/testdata/ray-serve-llm-two-replicas.prom")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	for _, tt := range []struct {
		name    string
		opt     Options
		workers int // 0: over the workers limit
	}{
		{"default", Options{}, 2},
		{"none", Options{WorkerLabels: []string{}}, 1},
		{"default over a limit of one worker", Options{Limits: page.Limits{MaxWorkers: 1}}, 0},
		{"none within a limit of one worker", Options{Limits: page.Limits{MaxWorkers: 1}, WorkerLabels: []string{}}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opt.Timeout = 5 * time.Second
			r := Fetch(context.Background(), target.Target{URL: srv.URL + "/metrics"}, tt.opt)
			if tt.workers == 0 {
				if !errors.Is(r.Err(), page.ErrLimit) {
					t.Fatalf("err %v, want a workers limit error", r.Err())
				}
				return
			}
			if r.Err() != nil || len(r.Page.Engines) != tt.workers {
				t.Fatalf("err %v, page %+v: want %d workers", r.Err(), r.Page, tt.workers)
			}
		})
	}
}
