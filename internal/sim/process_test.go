package sim_test

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/cli"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
)

// TestMain lets the test binary be vllmstat itself in a second process: with
// VLLMSTAT_TEST_AS_CLI=1 it runs its arguments as vllmstat's.
func TestMain(m *testing.M) {
	if os.Getenv("VLLMSTAT_TEST_AS_CLI") == "1" {
		os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestSimProcessSurvivesHostileRequests runs `vllmstat sim --workload none` as a process of its
// own and sends it the requests that once ended it (n of a billion: out of memory; max_tokens of
// 2^63-1 with ignore_eos: a panic), on vLLM's and SGLang's endpoints: each must be a 400, and
// the process must still answer after them.
func TestSimProcessSurvivesHostileRequests(t *testing.T) {
	for _, tc := range []struct {
		engine string
		posts  [][2]string // path, body
	}{
		{"vllm", [][2]string{
			{"/v1/completions", `{"prompt": "a", "n": 1000000000}`},
			{"/v1/completions", `{"prompt": "a", "max_tokens": 9223372036854775807, "ignore_eos": true}`},
			{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "n": 1000000000}`},
		}},
		{"sglang", [][2]string{
			{"/generate", `{"text": "a", "sampling_params": {"n": 1000000000}}`},
			{"/generate", `{"text": "a", "sampling_params": {"max_new_tokens": 9223372036854775807, "ignore_eos": true}}`},
		}},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			base, exited, stderr := startSimProcess(t, "--workload", "none", "--engine", tc.engine, "--port", "0", "--servers", "1")
			for _, p := range tc.posts {
				resp, err := http.Post(base+p[0], "application/json", strings.NewReader(p[1]))
				if err != nil {
					t.Fatalf("%s %s: %v\n%s", p[0], p[1], err, stderr.String())
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("%s %s: %d %s, want 400", p[0], p[1], resp.StatusCode, b)
				}
			}
			select {
			case <-exited:
				t.Fatalf("the simulator exited:\n%s", stderr.String())
			default:
			}
			resp, err := http.Get(base + "/health")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("health after the requests: %v\n%s", err, stderr.String())
			}
			resp.Body.Close()
		})
	}
}

// startSimProcess starts `vllmstat sim` with args and returns its first server's base URL, a
// channel closed when it exits, and its stderr. The process is killed at the test's end.
func startSimProcess(t *testing.T, args ...string) (string, <-chan struct{}, *syncbuf.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"sim"}, args...)...)
	cmd.Env = append(os.Environ(), "VLLMSTAT_TEST_AS_CLI=1")
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			urls <- sc.Text()
		}
		io.Copy(io.Discard, out)
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	select {
	case u := <-urls:
		return strings.TrimSuffix(u, "/metrics"), exited, stderr
	case <-exited:
		t.Fatalf("the simulator exited before it listened:\n%s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the simulator did not listen within 30s:\n%s", stderr.String())
	}
	return "", nil, nil
}
