package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestRayRunAndReplay runs "vllmstat run" against a real HTTP server answering a Ray
// metrics-agent page (two Ray Serve LLM replicas on one node, both engine="0"), then replays
// its recording: by default both tell the replicas apart by their worker labels and agree byte
// for byte; replay --worker-labels= merges them as vllmstat did before worker labels.
func TestRayRunAndReplay(t *testing.T) {
	var pages [2][]byte
	for i, name := range []string{"ray-serve-llm-two-replicas.prom", "ray-serve-llm-two-replicas-next.prom"} {
		b, err := os.ReadFile("../page/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		pages[i] = b
	}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(pages[min(n.Add(1)-1, 1)])
	}))
	defer srv.Close()

	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan int)
	go func() {
		done <- runWith(ctx, "run", []string{"--target", srv.URL, "--interval", "0.05", "--scrape-timeout", "5s",
			"--step-every", "200ms", "--listen", "", "--out", dir, "--record", rec, "--per-worker"}, &bytes.Buffer{}, &stderr)
	}()
	testkit.WaitFor(t, 10*time.Second, "the server to be scraped more than 8 times", func() bool { return n.Load() > 8 })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d\n%s", code, stderr.String())
	}
	steps, raw := readSteps(t, filepath.Join(dir, "steps.jsonl"))
	var queries float64
	for _, s := range steps {
		queries += s.Metrics["vllm/prefix_cache_queries"]
		if s.Scrapes.OK > 0 && (s.Workers != 2 || len(s.PerWorker) != 2 || s.PerWorker[1].Labels["ReplicaId"] != "p3xw9c4e") {
			t.Errorf("step %d: %d workers %+v, want the two replicas", s.Step, s.Workers, s.PerWorker)
		}
	}
	if queries != 4096+8192 {
		t.Errorf("prefix cache queries over all steps %v, want %v", queries, 4096+8192)
	}

	var out, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &out, &errb); code != 0 {
		t.Fatalf("replay exited %d: %s", code, errb.String())
	}
	if !bytes.Equal(out.Bytes(), raw) {
		t.Fatalf("replay differs from steps.jsonl\nreplay:\n%s\nrun:\n%s", out.String(), raw)
	}

	out.Reset()
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", "--worker-labels=", rec}, &out, &errb); code != 0 {
		t.Fatalf("replay --worker-labels= exited %d: %s", code, errb.String())
	}
	if strings.Contains(out.String(), `"labels"`) || !strings.Contains(out.String(), `"workers":1,`) || strings.Contains(out.String(), `"workers":2,`) {
		t.Errorf("replay without worker labels did not merge the replicas:\n%s", out.String())
	}

	errb.Reset()
	if code := RunContext(context.Background(), []string{"replay", "--worker-labels", "ReplicaId,engine", rec}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), `--worker-labels: "engine" cannot be a worker label`) {
		t.Errorf("replay with engine as a worker label: exit %d, %s", code, errb.String())
	}
	errb.Reset()
	if code := runWith(context.Background(), "run", []string{"--target", srv.URL, "--worker-labels", "Replica-Id", "--out", dir}, &bytes.Buffer{}, &errb); code != exitUsage || !strings.Contains(errb.String(), `--worker-labels: "Replica-Id" is not a label name`) {
		t.Errorf("run with a bad worker label: exit %d, %s", code, errb.String())
	}
}
