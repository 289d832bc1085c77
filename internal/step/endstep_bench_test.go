package step

import (
	"fmt"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
)

// BenchmarkEndStep measures closing a fleet's step, which a trainer's step end waits for: 1,000
// two-engine vLLM 0.20 targets, each scraped six times in the step (three seconds at 2 Hz).
func BenchmarkEndStep(b *testing.B) {
	scrapes := vllmScrapes(b)
	const targets, perStep = 1000, 6
	for _, opt := range []struct {
		name string
		opt  Options
	}{
		{"default", Options{Scalars: true}},
		{"no-timeline", Options{Scalars: true, NoTimeline: true}},
	} {
		b.Run(opt.name, func(b *testing.B) {
			f := newBenchFleet(scrapes, targets, NewTracker(opt.opt))
			tr := f.tr
			feed := func() { f.feed(b, perStep) }
			feed()
			tr.EndStep(1, at(f.sec))
			n := int64(1)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				feed()
				b.StartTimer()
				n++
				f.sec += 0.0005
				tr.EndStep(n, at(f.sec))
			}
		})
	}
}

// benchFleet is a fleet of two-engine vLLM 0.20 targets for the step end's benchmarks: each
// target's parser and URL, the scrapes its pages take turns from, and the tracker they feed.
type benchFleet struct {
	parsers []*page.Parser
	urls    []string
	scrapes [][]byte
	tr      *Tracker
	sec     float64 // the time of the last page, in seconds from t0
	k       int     // the scrape the next round of pages is
}

func newBenchFleet(scrapes [][]byte, targets int, tr *Tracker) *benchFleet {
	f := &benchFleet{parsers: make([]*page.Parser, targets), urls: make([]string, targets), scrapes: scrapes, tr: tr}
	for i := range f.parsers {
		f.parsers[i] = page.NewParser(page.Options{})
		f.urls[i] = fmt.Sprintf("http://10.0.%d.%d:8000/metrics", i/250, i%250)
	}
	return f
}

// feed has every target's page parsed and observed perStep times, half a millisecond apart.
func (f *benchFleet) feed(b testing.TB, perStep int) {
	for range perStep {
		f.k++
		for i, p := range f.parsers {
			pg, err := p.Parse(f.scrapes[f.k%len(f.scrapes)])
			if err != nil {
				b.Fatal(err)
			}
			f.sec += 0.0005
			f.tr.Observe(at(f.sec), f.urls[i], pg, nil)
			pg.Release()
		}
	}
}

// BenchmarkObserveFleet measures the tracker's work per page in a fleet's steady state: 1,000
// two-engine targets observed in turn, so that each page finds its target's state gone from
// the processor's caches, as in a run. A step ends every six rounds (not timed).
func BenchmarkObserveFleet(b *testing.B) {
	scrapes := vllmScrapes(b)
	const targets = 1000
	urls := make([]string, targets)
	pages := make([][]*page.Page, targets)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://10.0.%d.%d:8000/metrics", i/250, i%250)
		p := page.NewParser(page.Options{})
		for k := range 4 {
			pg, err := p.Parse(scrapes[(i+k)%len(scrapes)])
			if err != nil {
				b.Fatal(err)
			}
			pages[i] = append(pages[i], pg)
		}
	}
	tr := NewTracker(Options{Scalars: true, NoTimeline: true})
	sec := 0.0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		t := i % targets
		sec += 0.0005
		tr.Observe(at(sec), urls[t], pages[t][(i/targets)%4], nil)
		i++
		if i%(6*targets) == 0 {
			b.StopTimer()
			tr.EndStep(int64(i/(6*targets)), at(sec))
			b.StartTimer()
		}
	}
}
