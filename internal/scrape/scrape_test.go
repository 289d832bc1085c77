package scrape

import (
	"compress/gzip"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const page = "vllm:num_requests_running{engine=\"0\"} 3\n"

func TestFetch(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(page)) })
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			http.Error(w, "want gzip", 400)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		gz.Write([]byte(page))
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
				start := time.Now()
				r := fetch(context.Background(), Target{URL: u}, Options{Client: client, Timeout: 200 * time.Millisecond, MaxBody: 2000, KeepBody: true, Compression: tt.comp})
				if time.Since(start) > 3*time.Second {
					t.Fatal("the timeout did not bound the scrape")
				}
				if r.Reason() != tt.reason {
					t.Fatalf("reason %q (err %v), want %q", r.Reason(), r.Err(), tt.reason)
				}
				if tt.reason == "" {
					if r.Page == nil || len(r.Page.Engines) != 1 || r.Page.Engines[0].Gauges[0] != 3 || string(r.Body) != page {
						t.Fatalf("page %+v body %q", r.Page, r.Body)
					}
				}
				if tt.reason == "parse" && string(r.Body) != "<html>oops</html>" {
					t.Fatalf("a page that does not parse keeps its body for the recording: %q", r.Body)
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
		o := offset(u, spread)
		if o < 0 || o >= spread || o != offset(u, spread) {
			t.Fatalf("offset %v for %q", o, u)
		}
		seen[o/(50*time.Millisecond)] = true
	}
	if len(seen) < 8 {
		t.Fatalf("offsets fall in %d of 10 slices of the interval: not spread", len(seen))
	}
	if offset("http://a/metrics", 0) != 0 {
		t.Fatal("no spread must mean no offset")
	}
}
