package cli

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vllmstat/vllmstat/internal/testkit"
)

// fakeServer serves a captured vLLM page whose counters move: every answer first adds a random
// amount to each counter of each engine. It knows the true increase since its first answer,
// which the step totals must add up to.
type fakeServer struct {
	mu       sync.Mutex
	lines    []string
	values   map[string]float64 // by series (the line's name and labels)
	created  float64
	served   bool
	incs     []map[string]float64 // per answer: increments by family, summed over engines and reasons
	rng      *rand.Rand
	restarts map[int]bool // answer numbers at which the server restarts first
	garbage  map[int]bool // answer numbers that are an HTML error page
	n        int
	srv      *httptest.Server
}

var seriesRe = regexp.MustCompile(`^(vllm:(prefix_cache_queries|prefix_cache_hits|num_preemptions|prompt_tokens|generation_tokens|request_success)_(total|created))(\{[^}]*\}) (\S+)$`)

func newFakeServer(t *testing.T, fixture string, seed uint64) *fakeServer {
	t.Helper()
	b := testkit.ReadFixture(t, fixture)
	f := &fakeServer{values: map[string]float64{}, rng: rand.New(rand.NewPCG(seed, 7)),
		restarts: map[int]bool{}, garbage: map[int]bool{}, created: 1.7e9}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		f.lines = append(f.lines, sc.Text())
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) url() string { return f.srv.URL + "/metrics" }

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.garbage[f.n] {
		f.incs = append(f.incs, nil)
		fmt.Fprint(w, "<html><body><h1>500 Internal Server Error</h1></body></html>")
		return
	}
	if f.restarts[f.n] {
		for k := range f.values {
			f.values[k] = 0
		}
		f.created += 1000
	}
	var out strings.Builder
	fmt.Fprintf(&out, "# answer %d\n", f.n)
	incs := map[string]float64{}
	f.incs = append(f.incs, incs)
	for _, l := range f.lines {
		m := seriesRe.FindStringSubmatch(l)
		if m == nil {
			out.WriteString(l + "\n")
			continue
		}
		if m[3] == "created" {
			fmt.Fprintf(&out, "%s%s %s\n", m[1], m[4], strconv.FormatFloat(f.created, 'e', -1, 64))
			continue
		}
		key := m[1] + m[4]
		inc := float64(f.rng.IntN(100))
		f.values[key] += inc
		fam := m[2]
		if fam == "request_success" {
			fam += "/" + regexp.MustCompile(`finished_reason="(\w+)"`).FindStringSubmatch(m[4])[1]
		}
		incs[fam] += inc
		fmt.Fprintf(&out, "%s%s %s\n", m[1], m[4], strconv.FormatFloat(f.values[key], 'f', 1, 64))
	}
	f.served = true
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	fmt.Fprint(w, out.String())
}

// truth is the true increase between answers first and last (numbered from 1): what a run
// that saw those two answers, and nothing outside them, must count.
func (f *fakeServer) truth(first, last int) map[string]float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]float64{}
	for n := first + 1; n <= last; n++ {
		for k, v := range f.incs[n-1] {
			out[k] += v
		}
	}
	return out
}
