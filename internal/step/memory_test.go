package step

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/testkit"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// memFleet is a fleet of targets, each serving a copy of a two-engine vLLM 0.20 page whose
// gauges and counters move on at every scrape the way a busy engine's do.
type memFleet struct {
	rng   *rand.Rand
	urls  []string
	pages []*page.Page
}

func newMemFleet(tb testing.TB, targets int) *memFleet {
	body := testkit.ReadFixture(tb, "prometheus-client-render-vllm-0.20.prom")
	f := &memFleet{rng: rand.New(rand.NewPCG(1, 2))}
	for i := range targets {
		p, err := page.ParsePage(body)
		if err != nil {
			tb.Fatal(err)
		}
		f.urls = append(f.urls, fmt.Sprintf("http://10.0.%d.%d:8000/metrics", i/250, i%250))
		f.pages = append(f.pages, p)
	}
	return f
}

// next moves target i's page on by one scrape interval.
func (f *memFleet) next(i int) *page.Page {
	p := f.pages[i]
	for e := range p.Engines {
		ep := &p.Engines[e]
		ep.Gauges[vllm.Running] = float64(f.rng.IntN(64))
		ep.Gauges[vllm.Waiting] = float64(max(0, f.rng.IntN(12)-8))
		ep.Gauges[vllm.KVUsage] = float64(f.rng.IntN(20000)) / 20000
		for _, byReason := range ep.SplitGauges {
			for r := range byReason {
				byReason[r] = float64(max(0, f.rng.IntN(6)-4))
			}
		}
		for c := range ep.Counters {
			cs := &ep.Counters[c]
			switch cs.Family {
			case vllm.Preemptions, vllm.Corrupted:
				if f.rng.IntN(50) == 0 {
					cs.Value++
				}
			case vllm.RequestSuccess:
				cs.Value += float64(f.rng.IntN(3))
			default:
				cs.Value += float64(f.rng.IntN(4000))
			}
		}
	}
	return p
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkStepMemory reports the heap an open step holds per worker and scrape interval (one
// page of each target at 2 Hz), and what that projects to for 1,000 workers and a 10-minute step
// (1,200 intervals). Compare versions with
//
//	go test ./internal/step -run '^$' -bench StepMemory -benchtime 1x -count 5 | benchstat
func BenchmarkStepMemory(b *testing.B) {
	for _, c := range []struct {
		name               string
		targets, intervals int
		opt                Options
	}{
		{"scalars/1000workers/120intervals", 500, 120, Options{Scalars: true}},
		{"scalars/200workers/1200intervals", 100, 1200, Options{Scalars: true}},
		{"scalars/1000workers/1200intervals", 500, 1200, Options{Scalars: true}},
		{"scalars+per_worker/1000workers/120intervals", 500, 120, Options{Scalars: true, PerWorker: true}},
		{"scalars+no_timeline/1000workers/120intervals", 500, 120, Options{Scalars: true, NoTimeline: true}},
		{"scalars+no_timeline/200workers/1200intervals", 100, 1200, Options{Scalars: true, NoTimeline: true}},
		{"scalars+no_timeline/1000workers/1200intervals", 500, 1200, Options{Scalars: true, NoTimeline: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := newMemFleet(b, c.targets)
			var perWI, closeS float64
			for b.Loop() {
				tr := NewTracker(c.opt)
				now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
				for i := range c.targets { // the baseline scrapes
					tr.Observe(now, f.urls[i], f.next(i), nil)
				}
				tr.EndStep(1, now)
				before := heapInUse()
				workers := 0
				for range c.intervals {
					now = now.Add(500 * time.Millisecond)
					for i := range c.targets {
						p := f.next(i)
						workers = max(workers, len(p.Engines)*c.targets)
						tr.Observe(now.Add(time.Duration(i)*time.Microsecond), f.urls[i], p, nil)
					}
				}
				grown := heapInUse() - before
				perWI = float64(grown) / float64(workers*c.intervals)
				t0 := time.Now()
				tr.EndStep(2, now.Add(time.Second))
				closeS = time.Since(t0).Seconds()
				runtime.KeepAlive(tr)
			}
			b.ReportMetric(closeS*1e3, "ms/step-close")
			b.ReportMetric(perWI, "B/worker-interval")
			b.ReportMetric(perWI*1000*1200/(1<<20), "MiB/1000workers×10min")
		})
	}
}

// timeBytes is what a series' column of times holds; none when it keeps no times.
func timeBytes(c *ints) int {
	if c == nil {
		return 0
	}
	return len(c.b)
}

// columnBytes is what wa's columns hold.
func (wa *workerAcc) columnBytes() int {
	n := len(wa.act.spans.b)
	for g := range wa.gauges {
		n += len(wa.gauges[g].v.b) + timeBytes(wa.gauges[g].at)
		for _, c := range wa.splitGaugeOf(vllm.Gauge(g)) {
			n += len(c.b)
		}
	}
	for c := range wa.deltaCols {
		n += len(wa.deltaCols[c].v.b) + timeBytes(wa.deltaCols[c].at)
	}
	for i := range wa.ratioCols {
		n += len(wa.ratioCols[i].v.b) + timeBytes(wa.ratioCols[i].at)
	}
	return n
}

// TestOpenStepKeepsOnlyItsSamples checks what an open step holds per worker and scrape: the
// samples of the series its statistics use, in a few bytes each, and their times only for
// timelines.
func TestOpenStepKeepsOnlyItsSamples(t *testing.T) {
	for _, c := range []struct {
		name    string
		opt     Options
		maxB    float64 // bytes per worker and interval
		timed   bool
		prompts bool // prompt_tokens has a timeline but no statistics
	}{
		{"scalars", Options{Scalars: true, NoTimeline: true}, 32, false, false},
		{"scalars and timelines", Options{Scalars: true}, 80, true, true},
		{"neither", Options{NoTimeline: true}, 6, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newMemFleet(t, 20)
			tr := NewTracker(c.opt)
			now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			const intervals = 300
			for range intervals {
				now = now.Add(500 * time.Millisecond)
				for i := range 20 {
					// scrapes a few milliseconds late or early, as over a network
					tr.Observe(now.Add(time.Duration(f.rng.IntN(8000))*time.Microsecond), f.urls[i], f.next(i), nil)
				}
			}
			bytes, n := 0, 0
			for _, wa := range tr.open.workers {
				bytes += wa.columnBytes()
				n += wa.scrapes
				if got := wa.gauges[vllm.Running].at.len() > 0; got != c.timed {
					t.Errorf("times of num_requests_running kept: %v, want %v", got, c.timed)
				}
				if got := wa.delta(vllm.PromptTokens).v.len() > 0; got != c.prompts {
					t.Errorf("prompt_tokens increases kept: %v, want %v", got, c.prompts)
				}
			}
			if per := float64(bytes) / float64(n); per > c.maxB {
				t.Errorf("%.1f bytes per worker and scrape, want at most %v", per, c.maxB)
			}
		})
	}
}

// BenchmarkTrackerRetained reports what a tracker holds per worker after a baseline and a few
// scrapes of a two-engine vLLM 0.20 fleet: the windows' states and the open step's
// accumulators, before the step's samples grow (see BenchmarkStepMemory for those).
func BenchmarkTrackerRetained(b *testing.B) {
	const targets, intervals = 500, 4
	f := newMemFleet(b, targets)
	var per float64
	for b.Loop() {
		before := heapInUse()
		tr := NewTracker(Options{Scalars: true, NoTimeline: true})
		now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		workers := 0
		for range intervals {
			now = now.Add(500 * time.Millisecond)
			for i := range targets {
				p := f.next(i)
				workers = max(workers, len(p.Engines)*targets)
				tr.Observe(now, f.urls[i], p, nil)
			}
		}
		per = float64(heapInUse()-before) / float64(workers)
		runtime.KeepAlive(tr)
	}
	b.ReportMetric(per, "B/worker")
}
