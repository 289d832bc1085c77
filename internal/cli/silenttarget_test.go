package cli

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestRunStepEndAfterSilentTarget runs "vllmstat run" (interval 0.5 s, scrape timeout 1 s) and
// registers a target that accepts connections and never answers, then ends a step. The target
// has not answered once, so it has no baseline for the step to close: the step end waits for it
// the scrape timeout at most, and answers within 4 s (1 s and a margin) where it took 18 s (the
// rest of its first scrape's 10 s budget, then its boundary scrape's), with the answering
// target's workers.
func TestRunStepEndAfterSilentTarget(t *testing.T) {
	t.Parallel()
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 1)
	p := startProcRun(t, "--target", a.url(), "--out", t.TempDir(), "--interval", "0.5", "--scrape-timeout", "1s", "--step-every", "0")
	silent := testkit.SilentServer(t) + "/metrics"
	// Its registration waits 2 s at most for the first scrape, which does not come.
	if code, b, _, err := p.call("POST", "/v1/targets", `{"targets": ["`+silent+`"]}`, 10*time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("POST /v1/targets: %d %s %v\n%s", code, b, err, p.stderr.String())
	}
	code, b, d, err := p.call("POST", "/v1/steps/end", `{"step": 1}`, 4*time.Second)
	if err != nil || code != http.StatusOK {
		t.Fatalf("step end after a target that never answered: %d %s %v (after %v)\n%s", code, b, err, d, p.stderr.String())
	}
	t.Logf("step end answered in %v", d.Round(time.Millisecond))
	var rec struct {
		Step    int64 `json:"step"`
		Workers int   `json:"workers"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.Step != 1 || rec.Workers == 0 {
		t.Fatalf("step 1: %.300s %v, want the answering target's workers", b, err)
	}
	if !p.terminate(10*time.Second) || p.code != 0 {
		t.Fatalf("exit after SIGTERM: code %d\n%s", p.code, p.stderr.String())
	}
}
