package collector

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// silentServer accepts connections and never answers, as a server that hangs does.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// TestBoundaryCutsTargetWithoutBaseline adds a target that never answers while the run runs,
// then ends a step. Its first scrape has the first pages' budget (10 s), and its boundary scrape
// waits behind it; but a target that has not answered once has no baseline for the step to
// close, so the step end waits for it the scrape timeout at most, on the collector's clock, not
// the 10 s and more it waited. A target that answered is waited for.
func TestBoundaryCutsTargetWithoutBaseline(t *testing.T) {
	good := newCounterServer(t)
	obs := &recObserver{}
	const timeout = 3 * time.Second // the scrape timeout; the interval is 1 s
	c, fc, stop := start(t, Options{Options: scrape.Options{Timeout: timeout}, Targets: targets(good.srv.URL), Observer: obs, NoFinalStep: true})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	scraped := func() int { obs.mu.Lock(); defer obs.mu.Unlock(); return obs.scraped }
	testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { return scraped() == 1 })

	added := make(chan error, 1)
	go func() { added <- c.AddTargets(ctx, targets(silentServer(t))) }()
	if err := fc.BlockUntil(ctx, 1); err != nil { // the registration's wait for the first scrape
		t.Fatal(err)
	}
	fc.Advance(2 * time.Second) // FirstScrapeWait's default
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "the ticks' scrapes", func() bool { return scraped() == 3 })

	ended := make(chan error, 1)
	go func() { _, err := c.EndStep(ctx, 1); ended <- err }()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatalf("the step end waits on no timer for the target that never answered: %v", err)
	}
	// No tick has come since: the scrape is the answering target's boundary scrape.
	testkit.WaitFor(t, 5*time.Second, "the answering target's boundary scrape", func() bool { return scraped() == 4 })
	fc.Advance(timeout - time.Millisecond)
	for range 20 { // calls the collector answers after it has taken the time
		if _, _, err := c.Live(ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-ended:
		t.Fatalf("the step ended (%v) before the scrape timeout passed", err)
	default:
	}
	fc.Advance(time.Millisecond)
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	steps, err := c.Steps(ctx, 0)
	if err != nil || len(steps) != 1 || steps[0].Metrics["vllm/generation_tokens"] != 30 {
		t.Fatalf("steps %+v %v, want step 1 with the answering target's 3 increases of 10", steps, err)
	}
}
