package step

import (
	"fmt"
	"testing"

	"github.com/vllmstat/vllmstat/internal/benchpage"
	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// scrapesPerStep is how many successive scrapes of one target the scrape benchmarks cycle
// through: their counters grow from one to the next, and the step ends after the last one, so
// the wrap to the first one (a reset) comes once per step.
const scrapesPerStep = 120

// vllmScrapes returns successive scrapes of a two-engine vLLM 0.20 target: the same lines with
// moving values, as benchpage.Variant makes them.
func vllmScrapes(b *testing.B) [][]byte {
	body := testkit.ReadFixture(b, "prometheus-client-render-vllm-0.20.prom")
	out := make([][]byte, scrapesPerStep)
	for k := range out {
		out[k] = benchpage.Variant(body, k+1)
	}
	return out
}

// BenchmarkObserveScrapes measures the tracker's work per page on the collector's path, in
// the steady state of a scrape loop: successive pages of one target with moving values, read
// by one page.Parser as the scrape goroutines do. The step ends are not timed (nor their
// allocations counted): they are a record's work, not a page's. "observe" feeds pages parsed beforehand
// (distinct pages of one structure, as a Parser hands out while earlier ones are not yet
// released); "parse" parses each page and releases it after observing it, as the collector
// does. "intervals" adds the per-interval values a live run hands to its sinks.
func BenchmarkObserveScrapes(b *testing.B) {
	scrapes := vllmScrapes(b)
	observe := func(b *testing.B, opt Options) {
		p := page.NewParser(page.Options{})
		pages := make([]*page.Page, len(scrapes))
		for k, s := range scrapes {
			pg, err := p.Parse(s)
			if err != nil {
				b.Fatal(err)
			}
			pages[k] = pg
		}
		tr := NewTracker(opt)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			tr.Observe(at(float64(i)/2), target, pages[i%len(pages)], nil)
			if i%len(pages) == 0 {
				b.StopTimer()
				tr.EndStep(int64(i/len(pages)), at(float64(i)/2))
				b.StartTimer()
			}
		}
	}
	b.Run("observe", func(b *testing.B) { observe(b, Options{Scalars: true}) })
	b.Run("intervals", func(b *testing.B) {
		n := 0
		observe(b, Options{Scalars: true, OnInterval: func(iv Interval) { n += len(iv.Values) }})
	})
	b.Run("parse", func(b *testing.B) {
		p := page.NewParser(page.Options{})
		tr := NewTracker(Options{Scalars: true})
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			pg, err := p.Parse(scrapes[i%len(scrapes)])
			if err != nil {
				b.Fatal(err)
			}
			tr.Observe(at(float64(i)/2), target, pg, nil)
			pg.Release()
			if i%len(scrapes) == 0 {
				b.StopTimer()
				tr.EndStep(int64(i/len(scrapes)), at(float64(i)/2))
				b.StartTimer()
			}
		}
	})
}

// BenchmarkObserveSGLang measures the tracker's work per page of an SGLang server of two DP
// ranks (and its tokenizer) whose ranks change state at every scrape, the worst case of the
// ledger's span lists (every sample a span of its own), with a weight load every 60 scrapes.
func BenchmarkObserveSGLang(b *testing.B) {
	pages := make([]*page.Page, scrapesPerStep)
	lbl := `dp_rank="1",engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"`
	for k := range pages {
		body := sglangPage(sgl{dp: "0", running: float64(k % 2 * 3), gen: float64(10 * k)}, sgl{dp: "1", running: float64((k + 1) % 2 * 3)})
		body += fmt.Sprintf("sglang:weight_load_duration_seconds{%s,source=\"distributed\"} %v\n", lbl, 1+k/60)
		pg, err := page.ParsePage([]byte(body))
		if err != nil {
			b.Fatal(err)
		}
		pages[k] = pg
	}
	tr := NewTracker(Options{Scalars: true})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		tr.Observe(at(float64(i)/2), target, pages[i%len(pages)], nil)
		if i%len(pages) == 0 {
			b.StopTimer()
			tr.EndStep(int64(i/len(pages)), at(float64(i)/2))
			b.StartTimer()
		}
	}
}
