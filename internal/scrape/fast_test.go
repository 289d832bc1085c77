package scrape

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fetcher scrapes a target once, as Fetch does.
type fetcher func(ctx context.Context, tg Target, opt Options) Result

// viaBoth runs f with each way a scrape goes out: net/http's client, and the fast client a pool
// uses for plain-HTTP targets, so that both behave the same on every case f checks.
func viaBoth(t *testing.T, f func(t *testing.T, fetch fetcher)) {
	for _, fast := range []bool{false, true} {
		name := "net-http"
		if fast {
			name = "fast"
		}
		t.Run(name, func(t *testing.T) {
			f(t, func(ctx context.Context, tg Target, opt Options) Result {
				t.Helper()
				opt = opt.withDefaults()
				if fast {
					opt.fast = newFastClient(opt.MaxBody)
					t.Cleanup(opt.fast.close)
				}
				s := newScraper(tg, &opt)
				if fast && s.fast == nil && s.buildErr == nil {
					t.Fatalf("%s is not scraped by the fast client", tg.URL)
				}
				return s.scrape(ctx, &opt)
			})
		})
	}
}

// TestFastEligible checks which targets the fast client scrapes: plain HTTP only.
func TestFastEligible(t *testing.T) {
	if p, _ := http.ProxyFromEnvironment(httptest.NewRequest("GET", "http://10.1.2.3:8000/metrics", nil)); p != nil {
		t.Skip("a proxy is set in the environment: every target goes through net/http")
	}
	for u, want := range map[string]bool{
		"http://10.1.2.3:8000/metrics":  true,
		"http://[::1]:8000/metrics?a=b": true,
		"https://10.1.2.3:8000/metrics": false,
	} {
		req, _ := http.NewRequest("GET", u, nil)
		if got := fastEligible(req); got != want {
			t.Errorf("%s: fast %v, want %v", u, got, want)
		}
	}
}

// TestPoolCloseAbortsScrape checks that closing a pool ends a scrape in flight at once, not
// when its timeout runs out: the server sees the connection close while it still holds the
// request.
func TestPoolCloseAbortsScrape(t *testing.T) {
	entered := make(chan struct{})
	var once sync.Once
	var aborted atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(entered) })
		select {
		case <-r.Context().Done():
			aborted.Store(true)
		case <-time.After(30 * time.Second):
			w.Write([]byte(page))
		}
	}))
	defer srv.Close()
	out := make(chan Result, 1)
	p := NewPool(Options{Timeout: time.Minute}, out)
	p.Set([]Target{{URL: srv.URL + "/metrics"}})
	p.Tick()
	<-entered
	p.Close()
	srv.Close() // waits for the handler
	if !aborted.Load() {
		t.Fatal("the scrape in flight ran on after Close")
	}
}

// TestFastErrorsNameTarget checks that a failed restricted scrape names the target as
// configured, not the kilobytes of query it was sent with.
func TestFastErrorsNameTarget(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hj, _ := w.(http.Hijacker)
		c, _, _ := hj.Hijack()
		c.Close() // no answer at all
	}))
	defer srv.Close()
	u := srv.URL + "/metrics"
	viaBoth(t, func(t *testing.T, fetch fetcher) {
		r := fetch(context.Background(), Target{URL: u + "?x=1"}, Options{Timeout: 5 * time.Second})
		if r.FetchErr == nil || !strings.Contains(r.FetchErr.Error(), `"`+u+`?x=1"`) {
			t.Fatalf("err %v, want it to name %s", r.FetchErr, u+"?x=1")
		}
	})
}
