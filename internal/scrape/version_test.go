package scrape

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/target"
)

const sglangPage = "sglang:num_running_reqs{engine_type=\"unified\",model_name=\"m\",tp_rank=\"0\"} 2\n"

// engineServer serves a page and, at the paths of answers, their status and body; it counts
// the requests of every path and keeps the Authorization and Accept headers of the last one.
type engineServer struct {
	mu      sync.Mutex
	page    string
	answers map[string]answer
	asked   map[string]int
	auth    string
	accept  string
	srv     *httptest.Server
}

type answer struct {
	code int
	body string
}

func newEngineServer(t *testing.T, page string, answers map[string]answer) *engineServer {
	t.Helper()
	e := &engineServer{page: page, answers: answers, asked: map[string]int{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.asked[r.URL.Path]++
		if r.URL.Path == "/metrics" {
			if e.page == "" {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Write([]byte(e.page))
			return
		}
		e.auth, e.accept = r.Header.Get("Authorization"), r.Header.Get("Accept")
		a, ok := e.answers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(a.code)
		w.Write([]byte(a.body))
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *engineServer) set(f func(e *engineServer)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(e)
}

func (e *engineServer) count(path string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.asked[path]
}

// versionScrapers runs f with a server of page and answers, and a scraper of it whose requests go
// out each way a scrape's do (net/http, and the fast transport of a pool's plain-HTTP targets).
func versionScrapers(t *testing.T, page string, answers map[string]answer, f func(t *testing.T, e *engineServer, read func() *VersionReading)) {
	for _, fast := range []bool{false, true} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			e := newEngineServer(t, page, maps.Clone(answers))
			opt := Options{Timeout: 5 * time.Second}.withDefaults()
			if fast {
				opt.fast = newFastClient(opt.MaxBody)
			}
			tg := target.Target{URL: e.srv.URL + "/metrics", Auth: target.Auth{Authorization: &target.Authorization{Credentials: target.NewSecret("tok")}}}
			s := newScraper(context.Background(), tg, &opt)
			t.Cleanup(s.close)
			f(t, e, func() *VersionReading {
				t.Helper()
				r := s.scrape()
				if r.Err() != nil {
					return &VersionReading{Err: r.Err()}
				}
				defer r.Page.Release()
				return s.readVersion(r.Page)
			})
		})
	}
}

// TestVersionVLLM: a vLLM engine's version is read from /weight_info with the target's
// credentials; one without the endpoint (404) reports none, said once, and is not asked again.
func TestVersionVLLM(t *testing.T) {
	versionScrapers(t, runningPage, map[string]answer{"/weight_info": {200, `{"weight_version": "12"}`}}, func(t *testing.T, e *engineServer, read func() *VersionReading) {
		if r := read(); r == nil || r.Err != nil || !r.Reports || r.Version != 12 {
			t.Fatalf("reading %+v, want version 12", r)
		}
		var auth, accept string
		e.set(func(e *engineServer) { auth, accept = e.auth, e.accept })
		if auth != "Bearer tok" || accept != "application/json" {
			t.Fatalf("Authorization %q Accept %q: want the target's credentials, asking for JSON", auth, accept)
		}
	})

	versionScrapers(t, runningPage, nil, func(t *testing.T, none *engineServer, read func() *VersionReading) {
		if r := read(); r == nil || r.Err != nil || r.Reports {
			t.Fatalf("first reading %+v, want one that reports none", r)
		}
		for range 3 {
			if r := read(); r != nil {
				t.Fatalf("reading %+v of a target known to report none", r)
			}
		}
		if n := none.count("/weight_info"); n != 1 {
			t.Fatalf("/weight_info asked %d times, want once", n)
		}
	})
}

// TestVersionSGLang: an SGLang engine is asked /model_info, then the older /weight_version;
// the endpoint that answered is remembered, and asked alone from then on.
func TestVersionSGLang(t *testing.T) {
	versionScrapers(t, sglangPage, map[string]answer{
		"/model_info": {200, `{"model_path": "m", "is_generation": true, "weight_version": "7"}`},
	}, func(t *testing.T, cur *engineServer, read func() *VersionReading) {
		if r := read(); r == nil || !r.Reports || r.Version != 7 {
			t.Fatalf("reading %+v, want 7", r)
		}
		if cur.count("/weight_info") != 0 || cur.count("/weight_version") != 0 {
			t.Fatal("an SGLang engine was asked another endpoint than /model_info")
		}
	})

	versionScrapers(t, sglangPage, map[string]answer{
		"/model_info":     {200, `{"model_path": "m"}`}, // no weight_version: from before versions
		"/weight_version": {200, `{"weight_version": "3"}`},
	}, func(t *testing.T, old *engineServer, read func() *VersionReading) {
		for range 3 {
			if r := read(); r == nil || !r.Reports || r.Version != 3 {
				t.Fatalf("reading %+v, want 3", r)
			}
		}
		if n := old.count("/model_info"); n != 1 {
			t.Fatalf("/model_info asked %d times, want once: /weight_version answered", n)
		}
	})
}

// TestVersionValues: a decimal integer from 0 to 2^53 is a version; another string of at most
// 256 printable bytes is a tag, one too long or with control characters is refused without
// being kept; null and anything else is none, and an engine that answers null is asked again.
func TestVersionValues(t *testing.T) {
	long := strings.Repeat("x", MaxVersionTag)
	for _, tt := range []struct {
		body    string
		version int64
		reports bool
		tag     string
		refused string
	}{
		{body: `{"weight_version": "0"}`, version: 0, reports: true},
		{body: `{"weight_version": "9007199254740992"}`, version: 1 << 53, reports: true},
		{body: `{"weight_version": 5}`, version: 5, reports: true},
		{body: `{"weight_version": null}`},
		{body: `{"weight_version": "9007199254740993"}`},
		{body: `{"weight_version": "v7"}`, tag: "v7"},
		{body: `{"weight_version": "default"}`, tag: "default"},
		{body: `{"weight_version": "step-42"}`, tag: "step-42"},
		{body: `{"weight_version": "-1"}`, tag: "-1"},
		{body: `{"weight_version": "1.5"}`, tag: "1.5"},
		{body: `{"weight_version": "\u00e9tape 3"}`, tag: "\u00e9tape 3"},
		{body: `{"weight_version": ""}`},
		{body: `{"weight_version": 1.5}`},
		{body: `{"weight_version": ["1"]}`},
		{body: `{"weight_version": "` + long + `"}`, tag: long},
		{body: `{"weight_version": "` + long + `y"}`, refused: "longer than 256 bytes"},
		{body: `{"weight_version": "step-1\u001b[2J"}`, refused: "has a control or non-printing character"},
		{body: `{"weight_version": "step-1\n"}`, refused: "has a control or non-printing character"},
		{body: `{"weight_version": "step\u202e1"}`, refused: "has a control or non-printing character"},
		{body: `{"weight_version": "step-\ud8001"}`, tag: "step-\ufffd1"}, // a lone surrogate decodes as U+FFFD
	} {
		name := tt.body
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			e := newEngineServer(t, runningPage, map[string]answer{"/weight_info": {200, tt.body}})
			opt := Options{Timeout: 5 * time.Second}.withDefaults()
			s := newScraper(context.Background(), target.Target{URL: e.srv.URL + "/metrics"}, &opt)
			defer s.close()
			for range 2 {
				r := s.scrape()
				got := s.readVersion(r.Page)
				r.Page.Release()
				if got == nil || got.Err != nil || got.Reports != tt.reports || got.Version != tt.version || got.Tag != tt.tag || got.Refused != tt.refused {
					t.Fatalf("reading %+v, want version %d reports %v tag %q refused %q", got, tt.version, tt.reports, tt.tag, tt.refused)
				}
			}
			if n := e.count("/weight_info"); n != 2 {
				t.Fatalf("/weight_info asked %d times, want at each reading", n)
			}
		})
	}
}

// TestVersionFailures: a reading that fails says why without the answer's bytes, and learns
// nothing; a failed scrape of the page makes the endpoint learnt again.
func TestVersionFailures(t *testing.T) {
	const secret = "SECRET-BYTES"
	versionScrapers(t, runningPage, map[string]answer{"/weight_info": {500, secret}}, func(t *testing.T, e *engineServer, read func() *VersionReading) {
		r := read()
		if r == nil || r.Err == nil || !strings.Contains(r.Err.Error(), "HTTP status 500") || strings.Contains(r.Err.Error(), secret) {
			t.Fatalf("reading %+v, want HTTP status 500 without the answer's bytes", r)
		}
		e.set(func(e *engineServer) { e.answers["/weight_info"] = answer{200, "<html>" + secret + "</html>"} })
		r = read()
		if r == nil || r.Err == nil || !strings.Contains(r.Err.Error(), "not a JSON object") || strings.Contains(r.Err.Error(), secret) {
			t.Fatalf("reading %+v, want an answer that is not JSON, without its bytes", r)
		}
		e.set(func(e *engineServer) { e.answers["/weight_info"] = answer{200, `{"weight_version": "4"}`} })
		if r := read(); r == nil || r.Version != 4 {
			t.Fatalf("reading %+v, want 4", r)
		}
		// the server goes and comes back without the endpoint
		e.set(func(e *engineServer) { e.page = "" })
		if r := read(); r.Err == nil {
			t.Fatal("the page's failure was read as a version")
		}
		e.set(func(e *engineServer) { e.page = runningPage; delete(e.answers, "/weight_info") })
		if r := read(); r == nil || r.Err != nil || r.Reports {
			t.Fatalf("reading %+v, want none after the server came back without the endpoint", r)
		}
	})
}

// TestVersionTimeout: an endpoint that does not answer fails the reading within the scrape
// timeout.
func TestVersionTimeout(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(runningPage)) })
	mux.HandleFunc("/weight_info", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release)
	opt := Options{Timeout: 200 * time.Millisecond}.withDefaults()
	s := newScraper(context.Background(), target.Target{URL: srv.URL + "/metrics"}, &opt)
	defer s.close()
	s.scrapes = firstScrapes // past the first pages' budget
	r := s.scrape()
	defer r.Page.Release()
	if got := s.readVersion(r.Page); got == nil || got.Err == nil || !strings.Contains(got.Err.Error(), "timed out") {
		t.Fatalf("reading %+v, want a timeout", got)
	}
}

// TestPoolReadsVersion: a pool's target reads its version at the scrape after AskVersion, and
// at boundary scrapes once ReadVersions was called; at no other.
func TestPoolReadsVersion(t *testing.T) {
	e := newEngineServer(t, runningPage, map[string]answer{"/weight_info": {200, `{"weight_version": "2"}`}})
	out := make(chan Result, 4)
	p := NewPool(Options{Timeout: 5 * time.Second}, out)
	defer p.Close()
	u := e.srv.URL + "/metrics"
	p.Set([]target.Target{{URL: u}})
	next := func() Result {
		r := <-out
		r.Page.Release()
		return r
	}
	p.Tick()
	if r := next(); r.Err() != nil || r.Version != nil {
		t.Fatalf("tick: err %v version %+v, want no reading", r.Err(), r.Version)
	}
	p.Boundary(1)
	if r := next(); r.Version != nil {
		t.Fatalf("boundary before ReadVersions: version %+v, want no reading", r.Version)
	}
	p.ReadVersions()
	p.Boundary(2)
	if r := next(); r.Version == nil || r.Version.Version != 2 {
		t.Fatalf("boundary: version %+v, want 2", r.Version)
	}
	p.AskVersion([]string{u, "http://elsewhere/metrics"})
	p.Tick()
	if r := next(); r.Version == nil || r.Version.Version != 2 {
		t.Fatalf("asked: version %+v, want 2", r.Version)
	}
	p.Tick()
	if r := next(); r.Version != nil {
		t.Fatalf("tick after: version %+v, want none", r.Version)
	}
	if n := e.count("/weight_info"); n != 2 {
		t.Fatalf("/weight_info asked %d times, want 2", n)
	}
}

// TestTrailingVersion: a tag ends in a version when its trailing digits follow a part with a
// letter that does not end in '.'.
func TestTrailingVersion(t *testing.T) {
	for _, tt := range []struct {
		tag string
		v   int64
		ok  bool
	}{
		{"step-42", 42, true},
		{"v7", 7, true},
		{"global_step_000120", 120, true},
		{"ckpt/iter9007199254740992", 1 << 53, true},
		{"ckpt/iter9007199254740993", 0, false},
		{"step-12345678901234567", 0, false}, // 17 digits
		{"default", 0, false},
		{"step-", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.5", 0, false},
		{"v1.0", 0, false},
		{"42", 0, false}, // a decimal version, read as such before tags
		{"7-step", 0, false},
	} {
		v, ok := TrailingVersion(tt.tag)
		if v != tt.v || ok != tt.ok {
			t.Errorf("TrailingVersion(%q) = %d %v, want %d %v", tt.tag, v, ok, tt.v, tt.ok)
		}
	}
}
