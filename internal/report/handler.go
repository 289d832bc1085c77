package report

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/vllmstat/vllmstat/internal/clock"
)

// RefreshSeconds is how often the served page reloads itself.
const RefreshSeconds = 15

// Handler serves the report of the run in outDir at "/" (and "/index.html"), rebuilt on every
// request and reloading itself every RefreshSeconds. Timeline files already read are kept
// between requests, so a request reads only the steps closed since the last one. c stamps the
// page's generation time; nil is the wall clock.
func Handler(outDir string, c clock.Clock) http.Handler {
	if c == nil {
		c = clock.Real{}
	}
	return &handler{outDir: outDir, clock: c, src: newDirSource(outDir)}
}

type handler struct {
	outDir string
	clock  clock.Clock
	mu     sync.Mutex // one build at a time: the source's cache is not safe for concurrent use
	src    *dirSource
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" && r.URL.Path != "/index.html" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var b bytes.Buffer
	h.mu.Lock()
	err := writeFrom(&b, h.outDir, h.src, Options{Refresh: RefreshSeconds}, h.clock.Now())
	h.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	if errors.Is(err, ErrNoSteps) {
		// A run that has not closed a step yet: a page that says so and keeps reloading.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Refresh", fmt.Sprint(RefreshSeconds))
		fmt.Fprintf(w, "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>vllmstat</title></head><body><p>No step has closed yet; this page reloads every %d s.</p></body></html>\n", RefreshSeconds)
		return
	}
	if err != nil {
		http.Error(w, "build report: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b.Bytes())
}
