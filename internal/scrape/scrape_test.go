package scrape

import (
	"compress/gzip"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/target"
)

const runningPage = "vllm:num_requests_running{engine=\"0\"} 3\n"

func TestFetch(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(runningPage)) })
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			http.Error(w, "want gzip", 400)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		gz.Write([]byte(runningPage))
		gz.Close()
	})
	mux.HandleFunc("/503", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "busy", http.StatusServiceUnavailable) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(strings.Repeat("# x\n", 1000))) })
	mux.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>oops</html>")) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String() + "/metrics"
	l.Close()

	tests := []struct {
		path   string
		url    string
		reason string
		comp   Compression
	}{
		{path: "/ok"},
		{path: "/gzip", comp: CompressionGzip},
		{path: "/503", reason: "http_status"},
		{path: "/slow", reason: "timeout"},
		{path: "/big", reason: "body_too_large"},
		{path: "/html", reason: "parse"},
		{url: dead, reason: "refused"},
	}
	client := NewClient()
	viaBoth(t, func(t *testing.T, fetch fetcher) {
		for _, tt := range tests {
			u := tt.url
			if u == "" {
				u = srv.URL + tt.path
			}
			t.Run(u, func(t *testing.T) {
				// Only the slow page waits for its timeout: a short one for every page would fail
				// the others on a loaded machine, where a loopback answer can take that long.
				timeout := time.Minute
				if tt.reason == "timeout" {
					timeout = 200 * time.Millisecond
				}
				start := time.Now()
				r := fetch(context.Background(), target.Target{URL: u}, Options{Client: client, Timeout: timeout, MaxBody: 2000, KeepBody: true, Compression: tt.comp})
				if tt.reason == "timeout" && time.Since(start) > 5*time.Second {
					t.Fatal("the timeout did not bound the scrape")
				}
				if r.Reason() != tt.reason {
					t.Fatalf("reason %q (err %v), want %q", r.Reason(), r.Err(), tt.reason)
				}
				if tt.reason == "" {
					if r.Page == nil || len(r.Page.Engines) != 1 || r.Page.Engines[0].Gauges[0] != 3 || string(r.Body) != runningPage {
						t.Fatalf("page %+v body %q", r.Page, r.Body)
					}
				}
				if tt.reason == "parse" && r.Body != nil {
					t.Fatalf("a page that does not parse is kept for the recording (%q): it may hold anything, and its failure is recorded instead", r.Body)
				}
			})
		}
	})
}

func TestOffsetSpread(t *testing.T) {
	spread := 500 * time.Millisecond
	seen := map[time.Duration]bool{}
	for i := 0; i < 200; i++ {
		u := "http://10.0.0.1:" + string(rune('a'+i%26)) + "/metrics" + strings.Repeat("x", i)
		o := offset(u, spread, 0)
		if o < 0 || o >= spread || o != offset(u, spread, 0) {
			t.Fatalf("offset %v for %q", o, u)
		}
		seen[o/(50*time.Millisecond)] = true
	}
	if len(seen) < 8 {
		t.Fatalf("offsets fall in %d of 10 slices of the interval: not spread", len(seen))
	}
	if offset("http://a/metrics", 0, 0) != 0 {
		t.Fatal("no spread must mean no offset")
	}
}

// TestOffsetSlots checks that with slots, targets share a few offsets spread/slots apart, all
// of them used by a fleet.
func TestOffsetSlots(t *testing.T) {
	const spread, slots = 250 * time.Millisecond, 8
	seen := map[time.Duration]int{}
	for i := 0; i < 1000; i++ {
		o := offset(fmt.Sprintf("http://10.0.%d.%d:8000/metrics", i/256, i%256), spread, slots)
		if o < 0 || o >= spread || o%(spread/slots) != 0 {
			t.Fatalf("offset %v: not one of %d slots of %v", o, slots, spread)
		}
		seen[o]++
	}
	if len(seen) != slots {
		t.Fatalf("%d offsets used, want %d", len(seen), slots)
	}
	for o, n := range seen {
		if n < 1000/slots/2 {
			t.Errorf("offset %v has %d of 1000 targets: slots too uneven", o, n)
		}
	}
}

func TestSpreading(t *testing.T) {
	opt := &Options{Spread: time.Second, SpreadFrom: 10, Burst: 128}
	for _, tt := range []struct {
		n      int
		spread time.Duration
		slots  int64
	}{
		{n: 5}, {n: 128}, {n: 129, spread: time.Second, slots: 2}, {n: 1000, spread: time.Second, slots: 8},
	} {
		if s, sl := spreading(tt.n, opt); s != tt.spread || sl != tt.slots {
			t.Errorf("%d targets: spread %v in %d slots, want %v in %d", tt.n, s, sl, tt.spread, tt.slots)
		}
	}
	if s, sl := spreading(12, &Options{Spread: time.Second, SpreadFrom: 10}); s != time.Second || sl != 0 {
		t.Errorf("no burst: spread %v in %d slots, want every target its own offset", s, sl)
	}
}
