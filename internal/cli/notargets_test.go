package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestRunStartsWithoutTargets: a run with an API and no targets says so once, waits, and
// scrapes the targets that register through POST /v1/targets.
func TestRunStartsWithoutTargets(t *testing.T) {
	var tokens atomic.Int64
	tokens.Store(100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} %d\n", tokens.Load())
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncbuf.Buffer{}
	done := make(chan int)
	go func() {
		done <- runWith(ctx, "run", []string{"--interval", "0.05", "--scrape-timeout", "5s", "--step-every", "0",
			"--listen", "127.0.0.1:0", "--out", t.TempDir()}, &bytes.Buffer{}, stderr)
	}()
	base := apiURL(t, stderr)
	if n := strings.Count(stderr.String(), "no targets yet"); n != 1 {
		t.Fatalf("said %d times that there are no targets yet\n%s", n, stderr.String())
	}
	post := func(path, body string) map[string]any {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %v", path, resp.StatusCode, out)
		}
		return out
	}
	post("/v1/targets", `{"targets": ["`+srv.URL+`/metrics"]}`)
	// The target's first scrape is its baseline; the step counts what it served after it.
	if !testkit.Poll(10*time.Second, func() bool {
		resp, err := http.Get(base + "/v1/live")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var live struct {
			Targets []struct {
				Scrapes int `json:"scrapes"`
			} `json:"targets"`
		}
		json.NewDecoder(resp.Body).Decode(&live)
		return len(live.Targets) == 1 && live.Targets[0].Scrapes > 0
	}) {
		t.Fatalf("the registered target was not scraped\n%s", stderr.String())
	}
	tokens.Add(42)
	rec := post("/v1/steps/end", `{"step": 0}`)
	m := rec["metrics"].(map[string]any)
	if m["vllm/generation_tokens"] != 42.0 || rec["workers"] != 1.0 {
		t.Fatalf("step 0: %v", rec)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
}
