package window

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
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ps)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
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
