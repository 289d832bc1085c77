package page

import (
	"runtime"
	"testing"

	"github.com/vllmstat/vllmstat/internal/benchpage"
)

// retained parses page three times with each of n Parsers, releasing every page, and returns
// the heap they keep between scrapes, per Parser: what a fleet of targets costs at rest.
func retained(tb testing.TB, page []byte, n int) float64 {
	scrapes := [3][]byte{benchpage.Variant(page, 1), benchpage.Variant(page, 2), benchpage.Variant(page, 3)}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ps := make([]*Parser, n)
	for i := range ps {
		ps[i] = NewParser(Options{})
		for _, s := range scrapes {
			pg, err := ps[i].Parse(s)
			if err != nil {
				tb.Fatal(err)
			}
			pg.Release()
		}
	}
	// Twice: the first collection moves buffers pooled for the parses in progress (shared by
	// all Parsers, not kept by any) to where the second frees them.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ps)
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
}

// BenchmarkParserRetained reports the heap a Parser keeps between scrapes of each bench page,
// in bytes and per byte of the page. Run it with -benchtime=1x.
func BenchmarkParserRetained(b *testing.B) {
	for _, bp := range benchPages {
		b.Run(bp.name, func(b *testing.B) {
			body := bp.body(b)
			n := 1000
			if len(body) > 1<<18 {
				n = 20
			}
			var per float64
			for b.Loop() {
				per = retained(b, body, n)
			}
			b.ReportMetric(per, "B/parser")
			b.ReportMetric(per/float64(len(body)), "B/pagebyte")
		})
	}
}

// TestParserRetained bounds the heap a Parser keeps for a vLLM page, well above what it keeps
// (about 2.7 KB for this 38 KB page, its pages shared with the other Parsers of pages alike),
// well under what it kept with a page of its own between scrapes (10 KB), and with copies of
// the lines and raws as it had read them (82 KB): a fleet of targets keeps one Parser each.
func TestParserRetained(t *testing.T) {
	if testing.Short() {
		t.Skip("parses 600 pages")
	}
	body := fixture("prometheus-client-render-vllm-0.20.prom")(t)
	if per := retained(t, body, 200); per > 6<<10 {
		t.Errorf("a Parser keeps %.0f bytes for a %d-byte page, more than 6 KB", per, len(body))
	}
}
