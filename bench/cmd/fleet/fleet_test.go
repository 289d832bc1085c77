package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vllmstat/vllmstat/bench"
	"github.com/vllmstat/vllmstat/internal/benchpage"
)

// serve starts the handler on n loopback listeners and returns their base URLs.
func serve(t testing.TB, variants [][]byte, n int) []string {
	t.Helper()
	var lns []net.Listener
	var urls []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, l)
		urls = append(urls, "http://"+l.Addr().String())
	}
	srv := newServer(newPages(variants), lns, io.Discard)
	for _, l := range lns {
		go srv.Serve(l)
	}
	t.Cleanup(func() { srv.Shutdown() })
	return urls
}

// get fetches url, asking for gzip when gz is set, and returns the decoded body and whether it
// came gzipped.
func get(t *testing.T, url string, gz bool) ([]byte, bool) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gz {
		req.Header.Set("Accept-Encoding", "deflate, gzip;q=1.0")
	}
	// no transparent decompression: the test sees what the server sent
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: status %d", url, resp.StatusCode)
	}
	var r io.Reader = resp.Body
	zipped := resp.Header.Get("Content-Encoding") == "gzip"
	if zipped {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b, zipped
}

func TestServesVariantsInTurn(t *testing.T) {
	page, err := bench.Page("vllm-0.20")
	if err != nil {
		t.Fatal(err)
	}
	vs := [][]byte{benchpage.Variant(page, 0), benchpage.Variant(page, 1), benchpage.Variant(page, 2)}
	urls := serve(t, vs, 2)
	// port i starts at variant i and goes round
	for i, u := range urls {
		for j := range 4 {
			b, zipped := get(t, u+"/metrics", j%2 == 0)
			if zipped != (j%2 == 0) {
				t.Errorf("port %d request %d: gzipped %v, asked %v", i, j, zipped, j%2 == 0)
			}
			if want := vs[(i+j)%3]; !bytes.Equal(b, want) {
				t.Errorf("port %d request %d: not variant %d", i, j, (i+j)%3)
			}
		}
	}
	if b, _ := get(t, urls[1]+"/fleet/served", false); string(b) != "8\n" {
		t.Errorf("served %q, want 8", b)
	}
}

func TestServesNamedSamplesOnly(t *testing.T) {
	page, err := bench.Page("vllm-0.20")
	if err != nil {
		t.Fatal(err)
	}
	u := serve(t, [][]byte{page}, 1)[0] + "/metrics"
	names := []string{"vllm:num_requests_running", "vllm:time_to_first_token_seconds_count", "vllm:prompt_tokens_total", "no_such_metric"}
	want := 0
	for l := range bytes.Lines(page) {
		if slices.Contains(names, sampleName(l)) {
			want++
		}
	}
	if want < 6 {
		t.Fatalf("only %d lines of the page have the names", want)
	}
	first, _ := get(t, u+"?name[]="+strings.Join(names, "&name[]="), true)
	// the same set in another order, with an empty value, is the same restriction
	rev := slices.Clone(names)
	slices.Reverse(rev)
	again, _ := get(t, u+"?name[]=&name[]="+strings.Join(rev, "&name[]="), false)
	if !bytes.Equal(first, again) {
		t.Errorf("the same names in another order gave another page:\n%s\n---\n%s", first, again)
	}
	got := 0
	for l := range bytes.Lines(first) {
		if l[0] == '#' {
			continue
		}
		if !slices.Contains(names, sampleName(l)) {
			t.Errorf("sample not asked for: %s", l)
		}
		got++
	}
	if got != want {
		t.Errorf("%d samples, the page has %d with those names", got, want)
	}
	if all, _ := get(t, u+"?name[]=", false); !bytes.Equal(all, page) {
		t.Error("an empty name[] restricted the page")
	}
}

// TestSameNamesSameBody asks, as vllmstat does, for a few dozen names in one query of some
// kilobytes: the same raw query again, and the same names in another order, give the same
// restricted page.
func TestSameNamesSameBody(t *testing.T) {
	page, err := bench.Page("vllm-0.20")
	if err != nil {
		t.Fatal(err)
	}
	u := serve(t, [][]byte{page}, 1)[0] + "/metrics?"
	q := nameQuery(true)
	params := strings.Split(q, "&")
	slices.Reverse(params)
	first, _ := get(t, u+q, true)
	if len(first) == 0 || len(first) >= len(page) {
		t.Fatalf("a page of %d bytes for %d names, the full page has %d", len(first), len(params), len(page))
	}
	for _, tt := range []struct{ name, query string }{
		{"same query", q},
		{"reversed", strings.Join(params, "&")},
		// with the spellings of other namespaces, which the page does not have: some 15 KB
		{"every spelling", nameQuery(false)},
	} {
		if b, _ := get(t, u+tt.query, false); !bytes.Equal(b, first) {
			t.Errorf("%s: another page:\n%s\n---\n%s", tt.name, b, first)
		}
	}
}

// TestQueryLookup checks that a set of names is rendered once, and that a query is parsed
// once: later requests find it by its raw text.
func TestQueryLookup(t *testing.T) {
	p := newPages([][]byte{[]byte("a 1\nb 2\nc 3\n"), []byte("a 4\nb 5\nc 6\n")})
	for _, tt := range []struct {
		query string
		want  string // variant 1
	}{
		{"", "a 4\nb 5\nc 6\n"},
		{"x=1", "a 4\nb 5\nc 6\n"},
		{"name%5B%5D=", "a 4\nb 5\nc 6\n"},
		{"name%5B%5D=c&name%5B%5D=a", "a 4\nc 6\n"},
		{"name[]=a&name[]=&name[]=c&name[]=a", "a 4\nc 6\n"},
		{"name%5B%5D=c&name%5B%5D=a", "a 4\nc 6\n"},
		{"name[]=b", "b 5\n"},
	} {
		if got := p.get(1, []byte(tt.query)).plain; string(got) != tt.want {
			t.Errorf("query %q: %q, want %q", tt.query, got, tt.want)
		}
	}
	if len(p.byNames) != 2 || len(p.byQuery) != 5 {
		t.Errorf("%d sets for %d queries, want 2 for 5", len(p.byNames), len(p.byQuery))
	}
	if p.byQuery["name%5B%5D=c&name%5B%5D=a"] != p.byQuery["name[]=a&name[]=&name[]=c&name[]=a"] {
		t.Error("two queries for the same names have two sets")
	}
}

// The registry rendered by prometheus_client, in full and restricted to each set of names.
const pyRestrict = `
import json, sys
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
r = CollectorRegistry()
c = Counter("vllm:prompt_tokens", "Prompt tokens.", ["engine", "model_name"], registry=r)
g = Gauge("vllm:num_requests_running", "Running.", ["engine"], registry=r)
h = Histogram("vllm:time_to_first_token_seconds", "TTFT.", ["engine"], buckets=[0.1, 1], registry=r)
u = Gauge("untouched", "Never asked for.", registry=r)
for e in ["0", "1"]:
    c.labels(e, "m").inc(7)
    g.labels(e).set(3)
    h.labels(e).observe(0.5)
sets = json.loads(sys.argv[1])
print(json.dumps({"full": generate_latest(r).decode(),
                  "restricted": [generate_latest(r.restricted_registry(s)).decode() for s in sets]}))
`

// TestRestrictLikePrometheusClient compares restrict with prometheus_client's own rendering
// of a registry restricted by names. Families may come in another order (prometheus_client
// takes them from a set), so the pages are compared family by family.
func TestRestrictLikePrometheusClient(t *testing.T) {
	sets := [][]string{
		{"vllm:num_requests_running"},
		{"vllm:prompt_tokens_total", "vllm:time_to_first_token_seconds_count"},
		{"vllm:time_to_first_token_seconds_bucket", "vllm:prompt_tokens_created", "no_such_metric"},
		{"vllm:time_to_first_token_seconds_bucket", "vllm:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds_count", "vllm:time_to_first_token_seconds_created", "untouched"},
		{"no_such_metric"},
	}
	arg, _ := json.Marshal(sets) // a [][]string always marshals
	out, err := exec.Command("/usr/bin/python3", "-c", pyRestrict, string(arg)).Output()
	if err != nil {
		msg := "prometheus_client not usable with /usr/bin/python3 (install python3-prometheus-client): " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPING: " + msg)
	}
	var py struct {
		Full       string
		Restricted []string
	}
	if err := json.Unmarshal(out, &py); err != nil {
		t.Fatal(err)
	}
	for i, names := range sets {
		set := map[string]bool{}
		for _, n := range names {
			set[n] = true
		}
		got := families(string(restrict([]byte(py.Full), set)))
		if want := families(py.Restricted[i]); !slices.Equal(got, want) {
			t.Errorf("names %v:\ngot  %q\nwant %q", names, got, want)
		}
	}
}

// families splits a page into its families' text, sorted.
func families(page string) []string {
	var out []string
	for _, f := range strings.Split(page, "# HELP ") {
		if f != "" {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// TestRunUntilSIGTERM runs the command: it says where it listens once every port is open,
// serves there, and returns 0 on SIGTERM.
func TestRunUntilSIGTERM(t *testing.T) {
	r, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"-n", "3", "-variants", "2"}, w, io.Discard)
		w.Close()
	}()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("no ready line: %v", err)
	}
	go io.Copy(io.Discard, r)
	var base, count int
	if _, err := fmt.Sscanf(line, "fleet ready: base %d count %d", &base, &count); err != nil || count != 3 {
		t.Fatalf("ready line %q: %v", line, err)
	}
	page, err := bench.Page("vllm-0.20")
	if err != nil {
		t.Fatal(err)
	}
	for i := range count {
		// port i starts at variant i (of 2)
		b, _ := get(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", base+i), true)
		if !bytes.Equal(b, benchpage.Variant(page, i%2)) {
			t.Errorf("port %d: a page of %d bytes, not variant %d", base+i, len(b), i%2)
		}
	}
	// run has registered for SIGTERM before it printed the ready line
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}
