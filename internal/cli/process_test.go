package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// procRun is "vllmstat run" in a process of its own (this test binary standing in for it), so
// that a run that hangs can be killed and a signal reaches it as it reaches a real one.
type procRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	base   string        // the API's URL
	exited chan struct{} // closed once the process has exited
	code   int           // its exit code, once exited
}

// startProcRun starts "vllmstat run" with an API on a free port and args, and waits for the
// API's address.
func startProcRun(t *testing.T, args ...string) *procRun {
	t.Helper()
	p := &procRun{t: t, stderr: &syncbuf.Buffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], append([]string{"run", "--listen", "127.0.0.1:0"}, args...)...)
	p.cmd.Env = append(os.Environ(), "VLLMSTAT_TEST_AS_CLI=1")
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	re := regexp.MustCompile(`api listening" url=(\S+)`)
	if !testkit.Poll(30*time.Second, func() bool {
		if m := re.FindStringSubmatch(p.stderr.String()); m != nil {
			p.base = m[1]
		}
		return p.base != ""
	}) {
		t.Fatalf("no api address\n%s", p.stderr.String())
	}
	return p
}

// call sends a request to the run's API and returns the status, the body and how long the
// answer took; a request without an answer within limit is an error.
func (p *procRun) call(method, path, body string, limit time.Duration) (int, []byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, 0, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, time.Since(t0), fmt.Errorf("%s %s: no answer within %v: %w", method, path, limit, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, time.Since(t0), err
}

// targetCount returns how many targets the run scrapes, or an error when it does not answer
// within limit.
func (p *procRun) targetCount(limit time.Duration) (int, error) {
	code, b, _, err := p.call("GET", "/v1/targets", "", limit)
	if err != nil {
		return 0, err
	}
	var l struct {
		Targets []string `json:"targets"`
	}
	if err := json.Unmarshal(b, &l); err != nil || code != http.StatusOK {
		return 0, fmt.Errorf("GET /v1/targets: %d %v", code, err)
	}
	return len(l.Targets), nil
}

// terminate sends SIGTERM and waits up to limit for the process to exit; false when it did not.
func (p *procRun) terminate(limit time.Duration) bool {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.exited:
		return true
	case <-time.After(limit):
		return false
	}
}
