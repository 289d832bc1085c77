package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSimShapeFlags runs `vllmstat sim` in-process with and without --mfu-metrics and
// --kv-cache-metrics: its 0.20 pages have vLLM's MFU counters and KV block residency histograms
// only when asked, the recomputed positions either way.
func TestSimShapeFlags(t *testing.T) {
	for _, on := range []bool{true, false} {
		args := []string{"--port", "0", "--servers", "1", "--log-level", "error"}
		if on {
			args = append(args, "--mfu-metrics", "--model-params", "7e9", "--kv-cache-metrics")
		}
		page := simPage(t, args)
		for family, want := range map[string]bool{
			"vllm:estimated_flops_per_gpu_total":       on,
			"vllm:estimated_read_bytes_per_gpu_total":  on,
			"vllm:estimated_write_bytes_per_gpu_total": on,
			"vllm:kv_block_lifetime_seconds":           on,
			"vllm:kv_block_idle_before_evict_seconds":  on,
			"vllm:kv_block_reuse_gap_seconds":          on,
			"vllm:recomputed_token_executions_total":   true,
		} {
			if got := strings.Contains(page, "\n# TYPE "+family+" "); got != want {
				t.Errorf("%v: page has %s: %v, want %v", args, family, got, want)
			}
		}
	}
}

// simPage runs `vllmstat sim` with args until it has fetched its first server's page once.
func simPage(t *testing.T, args []string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runSimContext(ctx, args, pw, &stderr)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() {
		t.Fatalf("sim printed no URL; stderr %s", stderr.String())
	}
	resp, err := http.Get(sc.Text())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	cancel()
	go io.Copy(io.Discard, pr)
	select {
	case c := <-code:
		if c != exitOK {
			t.Fatalf("exit %d, stderr %s", c, stderr.String())
		}
	case <-time.After(5 * time.Second): // only a hang gets here
		t.Fatal("did not stop")
	}
	return string(body)
}
