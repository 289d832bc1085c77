package fleettest

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// fastConfig is a small fleet on free ports running 20x faster than the wall clock: a GRPO
// batch takes about half a second.
func fastConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.Port = 0
	cfg.DP = 2
	cfg.Speed = 20
	cfg.Tick = 5 * time.Millisecond
	cfg.Workload.StartDelay = 100 * time.Millisecond
	cfg.Workload.Pause = 200 * time.Millisecond
	return cfg
}

func startFleet(t *testing.T, cfg fleetconfig.Config) *sim.Fleet {
	t.Helper()
	before := runtime.NumGoroutine()
	f, err := sim.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		http.DefaultClient.CloseIdleConnections()
		testkit.Poll(2*time.Second, func() bool { return runtime.NumGoroutine() <= before })
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
	})
	return f
}

func mustGet(t *testing.T, url string) string {
	t.Helper()
	body, resp, err := get(t, http.DefaultClient, url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return body
}

func get(t *testing.T, client *http.Client, url string) (string, *http.Response, error) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp, err
}
