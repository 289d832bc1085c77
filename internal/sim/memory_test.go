package sim

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/serve"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// heldSampleBytes bounds what the simulator holds per sample of a request in flight: its
// engine request and block hashes, its waiting entry and its answer's slot.
const heldSampleBytes = 1 << 10

// TestDrivenMemoryBounded has 200 concurrent clients each send the worst request the bounds
// allow (the most samples, the most tokens, a body of the largest size) to a paused server, so
// that all of them are held at once, and checks that the heap then holds at most
// heldSampleBytes per sample over what it held before, and that it gives it back once they are
// answered. Nothing is timed: the test waits until the simulator holds every sample.
func TestDrivenMemoryBounded(t *testing.T) {
	cfg := simtest.FastConfig()
	cfg.Workload.Kind = workload.WorkloadNone
	cfg.Servers, cfg.DP = 1, 1
	cfg.MaxModelLen, cfg.BlocksPerEngine = 64, 16
	cfg.Speed = 1000
	w := &cfg.Workload
	w.SystemTokens, w.QuestionTokensMin, w.QuestionTokensMax, w.MaxTokens = 8, 4, 8, 16
	f := startFleet(t, cfg)
	base := strings.TrimSuffix(f.URLs()[0], "/metrics")

	// The worst request: 32 prompts of one token id, n 16, max_tokens 1: 512 samples of 2
	// tokens, the request's whole token budget (16 model lengths of 64), padded with spaces to
	// the largest body.
	const clients, prompts, n = 200, 32, 16
	ids := make([]string, prompts)
	for i := range ids {
		ids[i] = fmt.Sprintf("[%d]", i+1)
	}
	body := `{"prompt": [` + strings.Join(ids, ",") + `], "n": 16, "max_tokens": 1, "ignore_eos": true}`
	body += strings.Repeat(" ", int(serve.MaxBody(cfg.MaxModelLen))-len(body))
	samples := prompts * n
	if code, got := simtest.Post(t, base+"/v1/completions", body+" "); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a byte more than the largest body: %d %s", code, got)
	}
	if code, got := simtest.Post(t, base+"/v1/completions", strings.Replace(body, `"n": 16`, `"n": 17`, 1)); code != http.StatusBadRequest {
		t.Fatalf("a sample more than the budget: %d %s", code, got)
	}

	if code, got := simtest.Post(t, base+"/pause?mode=keep", ""); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, got)
	}
	heapInuse := func() uint64 { return testkit.HeapAfterGC().HeapInuse }
	before := heapInuse()
	var wg sync.WaitGroup
	codes := make([]int, clients)
	for i := range clients {
		wg.Go(func() {
			resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			codes[i] = resp.StatusCode
			resp.Body.Close()
		})
	}
	held := func() int {
		var k int
		f.do(context.Background(), func(s *fleetmodel.Sim) { k = len(s.Drive.Waiting) })
		return k
	}
	if !testkit.Poll(time.Minute, func() bool { return held() == clients*samples }) {
		t.Fatalf("the simulator holds %d samples, want %d", held(), clients*samples)
	}
	during := heapInuse()
	bound := uint64(clients * samples * heldSampleBytes)
	t.Logf("heap in use: %d MiB before, %d MiB holding %d requests of %d samples (%d bytes per sample); bound %d MiB",
		before>>20, during>>20, clients, samples, (during-min(during, before))/uint64(clients*samples), bound>>20)
	if during > before+bound {
		t.Errorf("holding %d requests grew the heap by %d MiB, more than %d MiB", clients, (during-before)>>20, bound>>20)
	}

	if code, got := simtest.Post(t, base+"/resume", ""); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, got)
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("client %d: %d", i, c)
		}
	}
	// The ground truth keeps a record per finished request; nothing else stays.
	after := heapInuse()
	t.Logf("heap in use after the answers: %d MiB", after>>20)
	if after > before+bound/4 {
		t.Errorf("after the answers the heap holds %d MiB more than before", (after-before)>>20)
	}
}
