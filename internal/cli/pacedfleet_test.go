package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/sim"
)

// pacedFleet is a simulated fleet that the scrapes pace: its clock is a fake one that only a
// scrape moves, to the wall time of the scrape. Each server sits behind a proxy on loopback
// that, for every scrape, moves the fleet's clock to now (simulated time 0 is the first scrape
// of any server, and Speed simulated seconds pass per wall second from then on), waits until
// the fleet has caught up and published its pages, takes the fleet's ground truth, and answers
// the server's page with a first line "# page N" (a comment, which every reader skips) naming
// that ground truth.
//
// So every page a scrape gets is the simulation at exactly the wall time the proxy answered it,
// whatever the machine's speed, and the ground truth of that moment is known page by page: what
// each engine did between two scrapes, and when the page was answered. A fleet paced by the
// wall clock instead publishes late when the machine is slow, by an amount nothing records.
type pacedFleet struct {
	fleet  *sim.Fleet
	clk    *clock.Fake
	t0     time.Time // the fake clock's start: the fleet's simulated time 0
	speed  float64
	urls   []string // the proxies' /metrics URLs, by server
	client *http.Client

	mu     sync.Mutex
	origin time.Time   // the first scrape's wall time; guarded by mu
	pages  []pacedPage // every page answered, by number; guarded by mu
}

// pacedPage is one page the proxies answered.
type pacedPage struct {
	server   int
	answered time.Time // the wall time the page is the simulation of
	truth    sim.GroundTruth
}

// startPacedFleet starts cfg's fleet (its Clock and Tick are the pacing's) behind its proxies.
func startPacedFleet(t *testing.T, cfg sim.Config) *pacedFleet {
	t.Helper()
	// The fake clock starts at the wall clock's time, so that the pages date what they create
	// (_created) as a real server would: before the run's start, or during the run.
	p := &pacedFleet{t0: time.Now(), speed: cfg.Speed, client: &http.Client{Timeout: 10 * time.Second}}
	p.clk = clock.NewFake(p.t0)
	cfg.Clock = p.clk
	cfg.Tick = time.Nanosecond // any move of the clock fires the fleet's tick
	f, err := sim.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.fleet = f
	t.Cleanup(func() { f.Close() })
	for i := range f.URLs() {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serve(i, w) }))
		t.Cleanup(srv.Close)
		p.urls = append(p.urls, srv.URL+"/metrics")
	}
	return p
}

// serve answers a scrape of server i (see pacedFleet). A failure is answered 500, which the run
// records as a failed scrape.
func (p *pacedFleet) serve(i int, w http.ResponseWriter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.origin.IsZero() {
		p.origin = now
	}
	if d := p.t0.Add(now.Sub(p.origin)).Sub(p.clk.Now()); d > 0 {
		p.clk.Advance(d)
		// The tick fired: the fleet advances, publishes, and waits on a new tick.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := p.clk.BlockUntil(ctx, 1)
		cancel()
		if err != nil {
			http.Error(w, "the fleet did not catch up: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	resp, err := p.client.Get(p.fleet.URLs()[i])
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		http.Error(w, fmt.Sprintf("server %d answered %d: %v", i, resp.StatusCode, err), http.StatusInternalServerError)
		return
	}
	p.pages = append(p.pages, pacedPage{server: i, answered: now, truth: p.fleet.GroundTruth()})
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	fmt.Fprintf(w, "# page %d\n", len(p.pages)-1)
	w.Write(body)
}

// page returns the page a body the proxies answered names.
func (p *pacedFleet) page(body string) (pacedPage, bool) {
	first, _, _ := strings.Cut(body, "\n")
	n, err := strconv.Atoi(strings.TrimPrefix(first, "# page "))
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil || n < 0 || n >= len(p.pages) {
		return pacedPage{}, false
	}
	return p.pages[n], true
}

// sim converts a wall-clock duration to simulated time.
func (p *pacedFleet) sim(d time.Duration) time.Duration { return time.Duration(float64(d) * p.speed) }
