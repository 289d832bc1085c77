package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/collector"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// rawTarget is a target on loopback that writes its answers byte for byte: serve reads a
// connection's requests and answers them as it likes. It counts connections and requests.
type rawTarget struct {
	l        net.Listener
	conns    atomic.Int64
	requests atomic.Int64
}

func newRawTarget(t *testing.T, serve func(r *rawTarget, c net.Conn, br *bufio.Reader)) *rawTarget {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rawTarget{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.conns.Add(1)
			go func() {
				defer c.Close()
				serve(r, c, bufio.NewReader(c))
			}()
		}
	}()
	return r
}

func (r *rawTarget) url() string { return "http://" + r.l.Addr().String() + "/metrics" }

// next reads the connection's next request, and counts it; false when there is none.
func (r *rawTarget) next(br *bufio.Reader) bool {
	req, err := http.ReadRequest(br)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, req.Body)
	r.requests.Add(1)
	return true
}

// tokensPage is a page whose last line is a generation counter of v.
func tokensPage(v float64) string {
	return "vllm:num_requests_running{engine=\"0\"} 1\n" + fmt.Sprintf("vllm:generation_tokens_total{engine=\"0\"} %v\n", v)
}

// answer is a whole HTTP/1.1 answer with page as its body.
func answer(page string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(page), page)
}

// liveTargets returns the targets of the run's /v1/live.
func liveTargets(t *testing.T, base string) []collector.TargetState {
	t.Helper()
	resp, err := http.Get(base + "/v1/live")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var live struct {
		Targets []collector.TargetState `json:"targets"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&live); err != nil {
		t.Fatal(err)
	}
	return live.Targets
}

// TestRunTruncatedPage runs "vllmstat run" against two targets whose pages arrive cut inside
// their last number, the generation counter: one says a Content-Length three bytes short of
// its page, the other answers in HTTP/1.0 and closes its connection three bytes early. The
// counter grows by 900 an answer, so a cut page reads 9 an answer ("2700" as "27"). No step
// may count a token: every scrape fails as truncated, and the targets are down.
func TestRunTruncatedPage(t *testing.T) {
	short := newRawTarget(t, func(r *rawTarget, c net.Conn, br *bufio.Reader) {
		for r.next(br) {
			page := tokensPage(900 * float64(r.requests.Load()))
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(page)-3, page)
		}
	})
	closed := newRawTarget(t, func(r *rawTarget, c net.Conn, br *bufio.Reader) {
		if r.next(br) {
			page := tokensPage(900 * float64(r.requests.Load()))
			fmt.Fprintf(c, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n%s", page[:len(page)-3])
		}
	})
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncbuf.Buffer{}
	done := make(chan int)
	go func() {
		done <- runWith(ctx, "run", []string{"--target", short.url(), "--target", closed.url(), "--interval", "0.05", "--scrape-timeout", "5s",
			"--step-every", "200ms", "--listen", "127.0.0.1:0", "--out", dir}, &bytes.Buffer{}, stderr)
	}()
	base := apiURL(t, stderr)
	testkit.WaitFor(t, 20*time.Second, "both targets to answer 12 times", func() bool {
		return short.requests.Load() >= 12 && closed.requests.Load() >= 12
	})
	for _, ts := range liveTargets(t, base) {
		if ts.Up || !strings.Contains(ts.LastError, "no final newline") {
			t.Errorf("/v1/live: %s up %v, last error %q; want it down, its page cut short", ts.URL, ts.Up, ts.LastError)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d\n%s", code, stderr.String())
	}
	steps, _ := readSteps(t, filepath.Join(dir, "steps.jsonl"))
	if len(steps) < 2 {
		t.Fatalf("%d steps, want at least 2\n%s", len(steps), stderr.String())
	}
	for _, s := range steps {
		if v := s.Metrics["vllm/generation_tokens"]; v != 0 || s.Scrapes.OK != 0 {
			t.Errorf("step %d: %v generation tokens from %d scrapes; a cut page has no number to read", s.Step, v, s.Scrapes.OK)
		}
	}
	for _, u := range []string{short.url(), closed.url()} {
		if !strings.Contains(stderr.String(), `msg="target down" target=`+u+" reason=truncated") {
			t.Errorf("stderr does not say %s is down with its pages cut short\n%s", u, stderr.String())
		}
	}
}

// TestRunNeverEchoesAnswers runs "vllmstat run" with a recording against targets whose
// answers are malformed in each way an answer can be, each holding a secret: a status line, a
// header, a body that is HTML, JSON or plain text, and a page with one bad line. Every scrape
// fails, and the secret appears neither on stderr, nor in the API's live view, nor in the
// recording: errors say what was wrong, where and how many bytes, never the bytes.
func TestRunNeverEchoesAnswers(t *testing.T) {
	const secret = "tok_s3cr3t_9f2c"
	answers := map[string]string{
		"status line": "HTTP/1.1 200 " + secret + "\x01\r\nContent-Length: 2\r\n\r\nm\n",
		"status code": secret + " 200 OK\r\nContent-Length: 2\r\n\r\nm\n",
		"header":      "HTTP/1.1 200 OK\r\nX-Token " + secret + "\r\nContent-Length: 2\r\n\r\nm\n",
		"length":      "HTTP/1.1 200 OK\r\nContent-Length: " + secret + "\r\n\r\nm\n",
		"html":        answer("<html><body>token: " + secret + "</body></html>\n"),
		"json":        answer(`{"token": "` + secret + `"}` + "\n"),
		"text":        answer(secret + " is the token\n"),
		"bad line":    answer(tokensPage(1) + "vllm:num_requests_waiting{engine=\"0\"} " + secret + "\n"),
		"bad label":   answer(tokensPage(1) + "vllm:num_requests_waiting{engine=\"0\",token=\"" + secret + "} 1\n"),
	}
	var targets []*rawTarget
	args := []string{"run"}
	for _, a := range answers {
		tg := newRawTarget(t, func(r *rawTarget, c net.Conn, br *bufio.Reader) {
			if r.next(br) {
				c.Write([]byte(a))
			}
		})
		targets = append(targets, tg)
		args = append(args, "--target", tg.url())
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncbuf.Buffer{}
	done := make(chan int)
	go func() {
		done <- runWith(ctx, args[0], append(args[1:], "--interval", "0.05", "--scrape-timeout", "5s", "--step-every", "200ms",
			"--listen", "127.0.0.1:0", "--out", dir, "--record", rec), &bytes.Buffer{}, stderr)
	}()
	base := apiURL(t, stderr)
	testkit.WaitFor(t, 20*time.Second, "every target to answer 5 times", func() bool {
		for _, tg := range targets {
			if tg.requests.Load() < 5 {
				return false
			}
		}
		return true
	})
	var served strings.Builder
	for _, p := range []string{"/v1/live", "/v1/targets", "/metrics"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(&served, resp.Body)
		resp.Body.Close()
	}
	live := liveTargets(t, base)
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d\n%s", code, stderr.String())
	}
	if len(live) != len(answers) {
		t.Fatalf("/v1/live has %d targets, want %d", len(live), len(answers))
	}
	for _, ts := range live {
		if ts.Up || ts.LastError == "" || ts.Failures == 0 {
			t.Errorf("/v1/live: %s up %v after %d failures, last error %q; want it down with the reason", ts.URL, ts.Up, ts.Failures, ts.LastError)
		}
	}
	recorded, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(recorded, []byte(`"kind":"scrape"`)) {
		t.Fatalf("the recording has no scrape\n%s", recorded)
	}
	for name, text := range map[string]string{"stderr": stderr.String(), "the API": served.String(), "the recording": string(recorded)} {
		if strings.Contains(text, secret[4:]) {
			t.Errorf("%s shows the secret a target answered\n%s", name, text)
		}
	}
}

// TestProcessQuietsNetHTTPLog runs vllmstat in a process of its own against a target that
// redirects (so net/http scrapes it) to a page whose Content-Length stops before its last line,
// a comment holding a secret: those bytes come on the idle connection after the answer, and
// net/http logs such an answer with its first bytes through the standard logger. The process's
// stderr says an answer came out of turn, without the bytes.
func TestProcessQuietsNetHTTPLog(t *testing.T) {
	const secret = "tok_s3cr3t_5be1"
	page := tokensPage(1)
	tg := newRawTarget(t, func(r *rawTarget, c net.Conn, br *bufio.Reader) {
		for r.next(br) {
			if r.requests.Load()%2 == 1 { // every other request is the redirect's
				c.Write([]byte("HTTP/1.1 302 Found\r\nLocation: /page\r\nContent-Length: 0\r\n\r\n"))
				continue
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s# %s\n", len(page), page, secret)
		}
	})
	p := startProcRun(t, "--target", tg.url(), "--interval", "0.05", "--scrape-timeout", "5s", "--step-every", "0", "--out", t.TempDir())
	testkit.WaitFor(t, 20*time.Second, "10 answers", func() bool { return tg.requests.Load() >= 10 })
	if !p.terminate(10 * time.Second) {
		t.Fatal("the run did not stop on SIGTERM")
	}
	if logs := p.stderr.String(); strings.Contains(logs, secret[4:]) || !strings.Contains(logs, "out of turn on an idle connection") {
		t.Fatalf("stderr shows the secret a target answered, or not that it answered out of turn\n%s", logs)
	}
}
