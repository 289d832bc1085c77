package scrape

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/target"
)

// vllmPage is a page with samples of four families vllmstat reads and one it does not.
const vllmPage = `# HELP vllm:num_requests_running Running requests.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 4.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 100.0
vllm:generation_tokens_total{engine="1",model_name="m"} 101.0
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e+09
vllm:generation_tokens_created{engine="1",model_name="m"} 1.7e+09
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 2.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 2.5
# TYPE http_requests_total counter
http_requests_total{handler="/a"} 1.0
http_requests_total{handler="/b"} 2.0
`

const preemptions = "vllm:num_preemptions_total{engine=\"0\",model_name=\"m\"} 7.0\n"

// namesServer serves a page and answers name[] requests in one of several ways; it records
// every request's query.
type namesServer struct {
	mu      sync.Mutex
	page    string
	mode    string // honour, ignore, empty (a MultiProcessCollector registry), refuse (414), fail (500)
	queries []url.Values
	auths   []string // the Authorization header of every request
}

func (s *namesServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := r.URL.Query()
	s.queries = append(s.queries, q)
	s.auths = append(s.auths, r.Header.Get("Authorization"))
	names, restricted := q["name[]"]
	switch {
	case !restricted || s.mode == "ignore":
		w.Write([]byte(s.page))
	case s.mode == "honour":
		w.Write(restrictPage([]byte(s.page), names))
	case s.mode == "empty":
	case s.mode == "refuse":
		http.Error(w, "URI too long", http.StatusRequestURITooLong)
	case s.mode == "fail":
		http.Error(w, "oops", http.StatusInternalServerError)
	}
}

func (s *namesServer) set(page string) { s.mu.Lock(); s.page = page; s.mu.Unlock() }

// asked returns the name[] parameters of each request since the last call, and checks that
// every request kept the target's own query.
func (s *namesServer) asked(t *testing.T) (asked [][]string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.queries {
		if q.Get("job") != "x" {
			t.Errorf("the target's own query was lost: %v", q)
		}
		asked = append(asked, q["name[]"])
	}
	s.queries = nil
	return asked
}

// vllmNames are the sample names vllmstat reads spelt with "vllm:".
func vllmNames() []string { s, _ := askedNames("vllm:"); return s }

// askedNames returns the names a query asks for in the namespaces of prefixes: the sample
// names vllmstat reads that begin with one of them, then the histogram family names.
func askedNames(prefixes ...string) (samples, families []string) {
	for _, n := range page.SampleNames() {
		for _, p := range prefixes {
			if strings.HasPrefix(n, p) && !strings.HasPrefix(n, "ray_"+p) {
				samples = append(samples, n)
				if base, ok := strings.CutSuffix(n, "_bucket"); ok {
					families = append(families, base)
				}
			}
		}
	}
	return samples, families
}

type restrictCase struct {
	t    *testing.T
	srv  *namesServer
	s    *scraper
	opt  Options
	logs *syncbuf.Buffer
	want *page.Page // the full page, parsed
}

func newRestrictCase(t *testing.T, mode string) *restrictCase {
	c := &restrictCase{t: t, srv: &namesServer{page: vllmPage, mode: mode}, logs: &syncbuf.Buffer{}}
	hs := httptest.NewServer(c.srv)
	t.Cleanup(hs.Close)
	c.opt = Options{Timeout: 5 * time.Second, RequestNames: true, Logger: slog.New(slog.NewTextHandler(c.logs, nil))}
	c.opt = c.opt.withDefaults()
	c.s = newScraper(context.Background(), target.Target{URL: hs.URL + "/metrics?job=x"}, &c.opt)
	want, err := page.ParsePage([]byte(vllmPage))
	if err != nil {
		t.Fatal(err)
	}
	c.want = want
	return c
}

// scrape scrapes once and checks the page against want and the requests sent against asks:
// one entry per request, "full" or "names".
func (c *restrictCase) scrape(want *page.Page, asks ...string) Result {
	c.t.Helper()
	r := c.s.scrape()
	if r.Err() != nil {
		c.t.Fatal(r.Err())
	}
	if !samePage(r.Page, want) {
		c.t.Errorf("page %+v, want %+v", r.Page, want)
	}
	var got []string
	for _, names := range c.srv.asked(c.t) {
		switch {
		case names == nil:
			got = append(got, "full")
		case slices.Equal(names, slices.Concat(askedNames("vllm:"))):
			got = append(got, "names")
		default:
			c.t.Errorf("asked for %d names, want the %d vllm: names", len(names), len(slices.Concat(askedNames("vllm:"))))
		}
	}
	if !slices.Equal(got, asks) {
		c.t.Errorf("requests %v, want %v", got, asks)
	}
	return r
}

func TestRequestNamesHonoured(t *testing.T) {
	c := newRestrictCase(t, "honour")
	full := c.scrape(c.want, "full")
	restricted := c.scrape(c.want, "names")
	if restricted.BodyBytes >= full.BodyBytes {
		t.Errorf("restricted page of %d bytes, full of %d", restricted.BodyBytes, full.BodyBytes)
	}
	// A family that appears later is on the next restricted page.
	c.srv.set(vllmPage + preemptions)
	later, err := page.ParsePage([]byte(vllmPage + preemptions))
	if err != nil {
		t.Fatal(err)
	}
	c.scrape(later, "names")
	// A family that goes away (a restarted server) is looked for on the full page, once.
	c.srv.set(strings.Replace(vllmPage, "vllm:generation_tokens_created", "other_created", 2))
	gone, err := page.ParsePage([]byte(strings.Replace(vllmPage, "vllm:generation_tokens_created", "other_created", 2)))
	if err != nil {
		t.Fatal(err)
	}
	c.scrape(gone, "names", "full")
	c.scrape(gone, "names")
	if c.logs.String() != "" {
		t.Errorf("logged %q for a server that answers well", c.logs.String())
	}
}

// TestRequestNamesIgnored checks that a target answering a restricted request with samples not
// asked for (it ignores name[]) is asked for full pages from then on, without kilobytes of
// query for nothing, until a failed scrape makes it learn the target again.
func TestRequestNamesIgnored(t *testing.T) {
	c := newRestrictCase(t, "ignore")
	c.scrape(c.want, "full")
	c.scrape(c.want, "names")
	c.scrape(c.want, "full")
	c.scrape(c.want, "full")
	c.srv.set("not a page\n")
	if r := c.s.scrape(); r.Reason() != "parse" {
		t.Fatalf("reason %q, want parse", r.Reason())
	}
	c.srv.asked(t)
	c.srv.set(vllmPage)
	c.scrape(c.want, "full")
	c.scrape(c.want, "names")
	c.scrape(c.want, "full")
	if c.logs.String() != "" {
		t.Errorf("logged %q for a server that ignores name[]", c.logs.String())
	}
}

// samePage reports whether two pages hold the same workers and samples (which parser made
// them, and whether it may reuse them, aside).
func samePage(a, b *page.Page) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.DeepEqual(a.Engines, b.Engines)
}

// TestRequestNamesAnsweredWrongly checks the targets whose restricted answers lose samples (an
// empty page, as a MultiProcessCollector registry answers) or refuse the query: the scrape asks
// again for the full page and gets it, the target is never restricted again, and that is
// logged once.
func TestRequestNamesAnsweredWrongly(t *testing.T) {
	for _, mode := range []string{"empty", "refuse"} {
		t.Run(mode, func(t *testing.T) {
			c := newRestrictCase(t, mode)
			c.scrape(c.want, "full")
			c.scrape(c.want, "names", "full")
			c.scrape(c.want, "full")
			c.scrape(c.want, "full")
			if n := strings.Count(c.logs.String(), "asking it for full pages from now on"); n != 1 {
				t.Errorf("logged %d times: %q", n, c.logs.String())
			}
			if !strings.Contains(c.logs.String(), "level=INFO") || !strings.Contains(c.logs.String(), "target=") {
				t.Errorf("log %q", c.logs.String())
			}
		})
	}
}

// TestRequestNamesAfterFailure checks that a failed scrape makes the next one ask for the full
// page (the target may come back as another server), and that a target whose pages have
// nothing vllmstat reads keeps being asked for full pages.
func TestRequestNamesAfterFailure(t *testing.T) {
	c := newRestrictCase(t, "honour")
	c.scrape(c.want, "full")
	c.scrape(c.want, "names")
	// A page that is not exposition text is a failed scrape, restricted or not: no second try.
	c.srv.mu.Lock()
	c.srv.mode, c.srv.page = "ignore", "not a page\n"
	c.srv.mu.Unlock()
	if r := c.s.scrape(); r.Reason() != "parse" || len(c.srv.asked(t)) != 1 {
		t.Fatalf("reason %q, want parse after one request", r.Reason())
	}
	c.srv.mu.Lock()
	c.srv.mode, c.srv.page = "honour", vllmPage
	c.srv.mu.Unlock()
	c.scrape(c.want, "full")
	c.scrape(c.want, "names")
	// A server error too.
	c.srv.mu.Lock()
	c.srv.mode = "fail"
	c.srv.mu.Unlock()
	if r := c.s.scrape(); r.Reason() != "http_status" || len(c.srv.asked(t)) != 1 {
		t.Fatalf("reason %q, want http_status after one request", r.Reason())
	}
	c.srv.mu.Lock()
	c.srv.mode = "honour"
	c.srv.mu.Unlock()
	c.scrape(c.want, "full")
	c.scrape(c.want, "names")
	// A page without anything vllmstat reads tells no namespace: full pages until one does.
	empty, _ := page.ParsePage(nil)
	c.srv.set("")
	c.scrape(empty, "names", "full")
	c.scrape(empty, "full")
	c.scrape(empty, "full")
	c.srv.set(vllmPage)
	c.scrape(c.want, "full")
	c.scrape(c.want, "names")
	if c.logs.String() != "" {
		t.Errorf("logged %q", c.logs.String())
	}
}

// TestRequestNamesScansOnce checks that a restricted answer with the lines of the previous one
// (the parser replayed it) is not scanned for its names again, and that one with other lines is.
func TestRequestNamesScansOnce(t *testing.T) {
	c := newRestrictCase(t, "honour")
	c.scrape(c.want, "full")
	for range 3 {
		c.scrape(c.want, "names")
	}
	if c.s.names.scans != 1 {
		t.Fatalf("%d restricted pages scanned, want 1 (the first)", c.s.names.scans)
	}
	c.srv.set(vllmPage + preemptions)
	later, err := page.ParsePage([]byte(vllmPage + preemptions))
	if err != nil {
		t.Fatal(err)
	}
	c.scrape(later, "names")
	c.scrape(later, "names")
	if c.s.names.scans != 2 {
		t.Fatalf("%d restricted pages scanned, want 2 (the first, and the first with a new line)", c.s.names.scans)
	}
}

func TestRequestNamesOff(t *testing.T) {
	c := newRestrictCase(t, "honour")
	c.opt.RequestNames = false
	c.scrape(c.want, "full")
	c.scrape(c.want, "full")
}

func TestScanNames(t *testing.T) {
	sn := readNames()
	page := "# TYPE vllm:num_requests_running gauge\n" +
		"vllm:num_requests_running 1\n" +
		"  vllm:num_requests_waiting{engine=\"0\"} 1\n" +
		"vllm:num_requests_waiting_more 2\n" + // a longer name with a read one as prefix
		"vllm:e2e_request_latency_seconds_bucket{le=\"1\"} 1\n" +
		"vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} 1\n" +
		"vllm:e2e_request_latency_seconds_count\t1\n" +
		"other{a=\"vllm:num_preemptions_total\"} 1\n" +
		"\n" +
		"# vllm:kv_cache_usage_perc 1\n" +
		"ray_vllm_num_requests_running 3" // no final newline
	set := newNameSet(len(sn.names))
	scanNames([]byte(page), sn, set)
	var got []string
	for i, n := range sn.names {
		if set.has(i) {
			got = append(got, n)
		}
	}
	slices.Sort(got)
	want := []string{"ray_vllm_num_requests_running", "vllm:e2e_request_latency_seconds_bucket", "vllm:e2e_request_latency_seconds_count", "vllm:num_requests_running", "vllm:num_requests_waiting"}
	if !slices.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	if m := set.mask(sn); m != 1|1<<2 {
		t.Errorf("namespaces %b, want vllm: and ray_vllm_", m)
	}
}

func TestNamesQuery(t *testing.T) {
	sn := readNames()
	for _, tt := range []struct {
		mask nsMask
		pref []string
	}{{1, []string{"vllm:"}}, {1 << 1, []string{"vllm_"}}, {1<<2 | 1<<3, []string{"ray_vllm_", "ray_vllm:"}}} {
		q, err := url.ParseQuery(sn.query(tt.mask))
		if err != nil {
			t.Fatal(err)
		}
		samples, families := askedNames(tt.pref...)
		want := slices.Concat(samples, families)
		if len(q) != 1 || !slices.Equal(q["name[]"], want) || len(samples) < 20 || len(families) < 3 {
			t.Errorf("%v: query asks for %d names, want %d", tt.pref, len(q["name[]"]), len(want))
		}
	}
	// A proxy in front of an engine holds the request line in a buffer of 8 KB (nginx's
	// large_client_header_buffers by default), with the method, path and version beside it.
	if n := len(sn.query(1)); n > 7680 {
		t.Errorf("the query of vllm: names is %d bytes: servers limit request lines", n)
	}
}

// TestRequestNamesErrors checks that a failed restricted scrape's error names the target as
// configured, not with the kilobytes of names asked for.
func TestRequestNamesErrors(t *testing.T) {
	c := newRestrictCase(t, "honour")
	c.scrape(c.want, "full")
	c.opt.Timeout = 50 * time.Millisecond
	c.srv.mu.Lock() // the server hangs until the scrape has timed out
	r := c.s.scrape()
	c.srv.mu.Unlock()
	if r.Reason() != "timeout" || strings.Contains(r.Err().Error(), "name") || !strings.Contains(r.Err().Error(), c.s.url) {
		t.Errorf("reason %q, error %q: want a timeout naming %s", r.Reason(), r.Err(), c.s.url)
	}
}

// TestPoolRequestNames checks that a pool's target keeps its state from scrape to scrape, also
// when it is given other credentials.
func TestPoolRequestNames(t *testing.T) {
	srv := &namesServer{page: vllmPage, mode: "honour"}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	out := make(chan Result, 1)
	p := NewPool(Options{Timeout: 5 * time.Second, RequestNames: true}, out)
	defer p.Close()
	u := hs.URL + "/metrics?job=x"
	p.Set([]target.Target{{URL: u}})
	var asked []int
	for i := range 3 {
		if i == 2 {
			p.Set([]target.Target{{URL: u, Auth: target.Auth{Authorization: &target.Authorization{Credentials: target.NewSecret("tok")}}}})
		}
		p.Tick()
		if r := <-out; r.Err() != nil {
			t.Fatal(r.Err())
		}
		for _, names := range srv.asked(t) {
			asked = append(asked, len(names))
		}
	}
	n := len(slices.Concat(askedNames("vllm:")))
	if !slices.Equal(asked, []int{0, n, n}) {
		t.Errorf("names asked per request %v, want none, then %d twice", asked, n)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if !slices.Equal(srv.auths, []string{"", "", "Bearer tok"}) {
		t.Errorf("Authorization headers %q", srv.auths)
	}
}

// TestRestrictedRequestLine checks that a restricted scrape sends the request line a plain URL
// would (the path, the target's query, the names), on both transports, and that through a proxy
// it sends the absolute URL (a proxy needs it): the proxy here is a server that records what it
// was asked and answers the page.
func TestRestrictedRequestLine(t *testing.T) {
	answer := []byte("vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1\n")
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.RequestURI)
		mu.Unlock()
		w.Write(answer)
	}))
	defer srv.Close()
	u := srv.URL + "/m%20x/metrics?job=a%26b"
	base, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	names := newRestriction()
	names.restrict(page.SampleNames()[:1])
	r, err := newRequest(u, &target.Auth{}, CompressionNone, names)
	if err != nil {
		t.Fatal(err)
	}
	plain := *base
	plain.RawQuery = base.RawQuery + "&" + names.sn.query(names.mask)
	want := plain.RequestURI()
	if r.requestURI(true) != want || r.restrictedURL().RequestURI() != want {
		t.Fatalf("request URI %q, URL %q; want %q", r.requestURI(true), r.restrictedURL().RequestURI(), want)
	}
	proxy, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxied := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	for name, c := range map[string]struct {
		opt  Options
		want string
	}{
		"fast":     {Options{fast: newFastClient(DefaultMaxBody)}, want},
		"net-http": {Options{Client: NewClient()}, want},
		"proxy":    {Options{Client: proxied}, plain.String()},
	} {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			opt := c.opt.withDefaults()
			opt.Timeout = 5 * time.Second
			tr := newTransport(context.Background(), r, &opt)
			defer tr.close()
			if _, fast := tr.(*fastTransport); fast != (opt.fast != nil) {
				t.Fatalf("transport %T", tr)
			}
			for range 2 {
				var buf bytes.Buffer
				body, err := tr.get(r, true, &buf, time.Now().Add(opt.Timeout))
				if err != nil || !bytes.Equal(body, answer) {
					t.Fatalf("page %q, %v", body, err)
				}
				tr.release()
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 2 || got[0] != c.want || got[1] != c.want {
				t.Fatalf("server saw %q, want %q twice", got, c.want)
			}
		})
	}
}
