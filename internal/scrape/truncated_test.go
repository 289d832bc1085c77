package scrape

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/target"
)

// cutPage is a page whose last line is a counter of 2700: cut three bytes short, it reads
// "27".
const cutPage = "vllm:num_requests_running{engine=\"0\"} 3\nvllm:generation_tokens_total{engine=\"0\"} 2700\n"

// TestTruncatedPage: a page cut inside its last line is a failed scrape (reason "truncated"),
// never a page whose last number lost its digits, however the answer was framed: a
// Content-Length shorter than the page, or an HTTP/1.0 answer whose connection closed mid-way.
// A complete page whose last line is "# EOF" without a newline (OpenMetrics makes that one
// optional) is whole.
func TestTruncatedPage(t *testing.T) {
	cut := cutPage[:len(cutPage)-3]
	var raw func(w http.ResponseWriter, answer string) // writes answer as is, then closes
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/short-length": // the whole page, behind a length that stops short of it
			raw(w, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(cut), cutPage))
		case "/closed":
			raw(w, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n"+cut)
		case "/eof":
			w.Write([]byte(cutPage + "# EOF"))
		case "/cut-eof":
			w.Write([]byte(cutPage + "# EO"))
		}
	}))
	defer srv.Close()
	raw = func(w http.ResponseWriter, answer string) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		c.Write([]byte(answer))
		c.Close()
	}
	viaBoth(t, func(t *testing.T, fetch fetcher) {
		for _, path := range []string{"/short-length", "/closed", "/cut-eof"} {
			r := fetch(context.Background(), target.Target{URL: srv.URL + path}, Options{Timeout: 5 * time.Second, KeepBody: true})
			if r.Reason() != "truncated" || r.Page != nil || r.Body != nil {
				t.Fatalf("%s: reason %q (err %v), counter %v, body %q; want a scrape failed as truncated, without page or body", path, r.Reason(), r.Err(), counterOf(&r), r.Body)
			}
			if msg := r.Err().Error(); !strings.Contains(msg, "final newline") || !strings.Contains(msg, "line 2") && !strings.Contains(msg, "line 3") {
				t.Errorf("%s: error %q; want one that says which line has no final newline", path, msg)
			}
		}
		r := fetch(context.Background(), target.Target{URL: srv.URL + "/eof"}, Options{Timeout: 5 * time.Second})
		if r.Err() != nil || r.Page == nil || len(r.Page.Engines) != 1 || r.Page.Engines[0].Counters[0].Value != 2700 {
			t.Fatalf("a page ending in # EOF without newline: err %v, page %+v; want it read whole", r.Err(), r.Page)
		}
	})
}
