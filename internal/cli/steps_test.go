package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// levelServer serves a captured vLLM page whose counters move only when the test bumps them,
// so the exact increase between two step ends is known. It can also hold one request: that
// request's page is drawn when it arrives, and sent only when the test releases it, so that an
// answer from before a bump arrives after it.
type levelServer struct {
	mu      sync.Mutex
	lines   []string
	values  map[string]float64 // by series (the line's name and labels)
	rng     *rand.Rand
	answers int
	holdOne bool          // the next request is held
	held    chan struct{} // closed when a held request has arrived
	release chan struct{} // closing it sends the held answer
	srv     *httptest.Server
}

func newLevelServer(t *testing.T, fixture string, seed uint64) *levelServer {
	t.Helper()
	b := testkit.ReadFixture(t, fixture)
	s := &levelServer{values: map[string]float64{}, rng: rand.New(rand.NewPCG(seed, 11))}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		s.lines = append(s.lines, sc.Text())
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.mu.Lock()
		if s.release != nil {
			close(s.release) // never leave a handler blocked, or Close waits for it
			s.release = nil
		}
		s.mu.Unlock()
		s.srv.Close()
	})
	return s
}

func (s *levelServer) url() string { return s.srv.URL + "/metrics" }

func (s *levelServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.answers++
	page := s.page()
	var release chan struct{}
	if s.holdOne {
		s.holdOne = false
		release = s.release
		close(s.held)
	}
	s.mu.Unlock()
	if release != nil {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	io.WriteString(w, page)
}

// page renders the fixture with the current counter values. Called with mu held.
func (s *levelServer) page() string {
	var out strings.Builder
	for _, l := range s.lines {
		m := seriesRe.FindStringSubmatch(l)
		if m == nil || m[3] == "created" {
			out.WriteString(l + "\n")
			continue
		}
		fmt.Fprintf(&out, "%s%s %s\n", m[1], m[4], strconv.FormatFloat(s.values[m[1]+m[4]], 'f', 1, 64))
	}
	return out.String()
}

// bump adds a random amount to every counter series and returns the increase per family
// (request_success split by finished_reason), summed over engines: the exact increase of
// the step that ends next.
func (s *levelServer) bump() map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	inc := map[string]float64{}
	for _, l := range s.lines {
		m := seriesRe.FindStringSubmatch(l)
		if m == nil || m[3] == "created" {
			continue
		}
		v := float64(1 + s.rng.IntN(1000))
		s.values[m[1]+m[4]] += v
		fam := m[2]
		if fam == "request_success" {
			fam += "/" + regexp.MustCompile(`finished_reason="(\w+)"`).FindStringSubmatch(m[4])[1]
		}
		inc[fam] += v
	}
	return inc
}

// hold makes the server hold the next request; the returned channel is closed once it has
// arrived, and release sends its answer.
func (s *levelServer) hold() (arrived <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdOne = true
	s.held = make(chan struct{})
	s.release = make(chan struct{})
	return s.held
}

func (s *levelServer) releaseHeld() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.release)
	s.release = nil
}

func (s *levelServer) answered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answers
}

// stepFamilies are the step record's counter keys (without the "vllm/" prefix) the test checks.
var stepFamilies = []string{"prefix_cache_queries", "prefix_cache_hits", "num_preemptions", "prompt_tokens", "generation_tokens", "request_success/stop", "request_success/length", "request_success/abort"}

// TestRunStepTotalsPerStep checks each step of a real run, not only their sum: the test ends
// every step itself through the API, and between two step ends the servers' counters move by
// amounts the test chose, so each step's exact total is known. At every step end, a scrape that
// started before the counters moved is still in flight when the end is asked for; its answer
// (the old counts) must not be taken for the boundary scrape, which the collector asks for
// after it. A run that took any answer as the boundary would put each step's increase into the
// next step, and the per-step comparison fails.
func TestRunStepTotalsPerStep(t *testing.T) {
	servers := []*levelServer{
		newLevelServer(t, "prometheus-client-render-vllm-0.20.prom", 1),
		newLevelServer(t, "prometheus-client-render-vllm-0.10.prom", 2),
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- runWith(ctx, "run", []string{"--target", servers[0].url(), "--target", servers[1].url(),
			"--interval", "0.05", "--scrape-timeout", "10s", "--step-every", "0", "--listen", "127.0.0.1:0", "--out", dir},
			&bytes.Buffer{}, stderr)
	}()
	base := apiURL(t, stderr)
	for _, s := range servers {
		if !testkit.Poll(10*time.Second, func() bool { return s.answered() >= 1 }) {
			t.Fatalf("server %s never scraped\n%s", s.url(), stderr.String())
		}
	}

	const steps = 4
	want := make([]map[string]float64, steps)
	got := make([]step.Record, steps)
	for k := range steps {
		n := k + 1
		// A periodic scrape of each server arrives before the bump and is answered after it.
		for _, s := range servers {
			select {
			case <-s.hold():
			case <-time.After(10 * time.Second):
				t.Fatalf("step %d: no periodic scrape of %s arrived", n, s.url())
			}
		}
		want[k] = map[string]float64{}
		for _, s := range servers {
			for fam, v := range s.bump() {
				want[k][fam] += v
			}
		}
		type answer struct {
			code int
			rec  step.Record
			err  error
		}
		answers := make(chan answer, 2)
		end := func() {
			code, rec, err := postEnd(base, n)
			answers <- answer{code, rec, err}
		}
		// Two requests to end step n: one ends it, the other is refused (409) as soon as the
		// first has asked for the boundary scrapes. So once the refusal is in, the boundary is
		// pending while the held scrapes are still in flight.
		go end()
		go end()
		var first answer
		select {
		case first = <-answers:
		case <-time.After(10 * time.Second):
			t.Fatalf("step %d: neither request to end it came back while the scrapes were held", n)
		}
		if first.err != nil || first.code != http.StatusConflict {
			t.Fatalf("step %d: the first answer is %d %v, want the refusal of the second request", n, first.code, first.err)
		}
		for _, s := range servers {
			s.releaseHeld()
		}
		var second answer
		select {
		case second = <-answers:
		case <-time.After(20 * time.Second):
			t.Fatalf("step %d did not close", n)
		}
		if second.err != nil || second.code != http.StatusOK {
			t.Fatalf("step %d: %d %v", n, second.code, second.err)
		}
		got[k] = second.rec
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d\n%s", code, stderr.String())
	}

	for k := range steps {
		if got[k].Step != int64(k+1) {
			t.Errorf("record %d is step %d", k+1, got[k].Step)
		}
		for _, fam := range stepFamilies {
			if g, w := got[k].Metrics["vllm/"+fam], want[k][fam]; g != w {
				t.Errorf("step %d: %s = %v, the servers' counters moved by %v", k+1, fam, g, w)
			}
		}
	}
	// What the API returned is what steps.jsonl holds, and nothing more: the step open at
	// shutdown was never ended, so it is no step.
	written, _ := readSteps(t, dir+"/steps.jsonl")
	if len(written) != steps {
		t.Fatalf("steps.jsonl has %d steps, want the trainer's %d", len(written), steps)
	}
	for k := range steps {
		for _, fam := range stepFamilies {
			if a, b := written[k].Metrics["vllm/"+fam], got[k].Metrics["vllm/"+fam]; a != b {
				t.Errorf("step %d: %s is %v in steps.jsonl, %v from the API", k+1, fam, a, b)
			}
		}
	}
	open, err := os.ReadFile(dir + "/open-step.json")
	if err != nil {
		t.Fatalf("the step open at exit was not kept: %v", err)
	}
	var rec step.Record
	if err := json.Unmarshal(open, &rec); err != nil || rec.Step != 0 {
		t.Fatalf("open-step.json: %v, %s", err, open)
	}
	for _, fam := range stepFamilies {
		if v := rec.Metrics["vllm/"+fam]; v != 0 {
			t.Errorf("the step open at shutdown counts %s = %v, the counters did not move", fam, v)
		}
	}
}

// apiURL waits for the run's "api listening" line and returns its URL.
// apiCall sends a request with body and header (a "Host" entry sets the request's host) and
// returns the answer's status and body.
func apiCall(t *testing.T, method, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func apiURL(t *testing.T, stderr *syncbuf.Buffer) string {
	t.Helper()
	re := regexp.MustCompile(`api listening" url=(\S+)`)
	var base string
	if !testkit.Poll(10*time.Second, func() bool {
		m := re.FindStringSubmatch(stderr.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}) {
		t.Fatalf("no api address\n%s", stderr.String())
	}
	return base
}

func postEnd(base string, n int) (int, step.Record, error) {
	resp, err := http.Post(base+"/v1/steps/end", "application/json", strings.NewReader(fmt.Sprintf(`{"step": %d}`, n)))
	if err != nil {
		return 0, step.Record{}, err
	}
	defer resp.Body.Close()
	var rec step.Record
	if resp.StatusCode == http.StatusOK {
		err = json.NewDecoder(resp.Body).Decode(&rec)
	}
	return resp.StatusCode, rec, err
}

// deadAddr returns a loopback address that refuses connections for the whole test: its port is
// bound but not listening, so no other process can take it meanwhile.
func deadAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
