package window

import (
	"os"
	"testing"

	"github.com/vllmstat/vllmstat/internal/benchpage"
)

// benchPages are the pages the parse benchmarks read: the two largest vLLM fixtures and a 1 MB
// Ray node page where the vLLM families are a small part.
var benchPages = []struct {
	name string
	body func(testing.TB) []byte
}{
	{"vllm-0.10", fixture("prometheus-client-render-vllm-0.10.prom")},
	{"vllm-0.20", fixture("prometheus-client-render-vllm-0.20.prom")},
	{"ray-1MB", func(testing.TB) []byte { return benchpage.Ray(1 << 20) }},
}

func fixture(name string) func(testing.TB) []byte {
	return func(tb testing.TB) []byte {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
}

// BenchmarkParsePageCold parses each page from scratch, as ParsePage always does.
func BenchmarkParsePageCold(b *testing.B) {
	for _, bp := range benchPages {
		b.Run(bp.name, func(b *testing.B) {
			body := bp.body(b)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParsePage(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParserWarm parses successive scrapes of one target (the page's values moved, its
// lines kept, as benchpage.Variant makes them) with one Parser, releasing each page before the
// next parse as the collector does: the steady state of a scrape loop.
func BenchmarkParserWarm(b *testing.B) {
	for _, bp := range benchPages {
		b.Run(bp.name, func(b *testing.B) {
			body := bp.body(b)
			var scrapes [8][]byte
			for k := range scrapes {
				scrapes[k] = benchpage.Variant(body, k+1)
			}
			p := NewParser(Options{})
			for _, s := range scrapes {
				pg, err := p.Parse(s)
				if err != nil {
					b.Fatal(err)
				}
				pg.Release()
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				pg, err := p.Parse(scrapes[k%len(scrapes)])
				if err != nil {
					b.Fatal(err)
				}
				pg.Release()
				k++
			}
		})
	}
}

// BenchmarkParserCold parses pages whose lines change every time with one Parser: what a
// target whose shape never holds still costs (each parse is a full one that also remembers).
func BenchmarkParserCold(b *testing.B) {
	for _, bp := range benchPages {
		b.Run(bp.name, func(b *testing.B) {
			body := bp.body(b)
			// Two pages that differ in one comment line: each parse misses the other's shape.
			scrapes := [2][]byte{body, append([]byte("# another shape\n"), body...)}
			p := NewParser(Options{})
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				pg, err := p.Parse(scrapes[k%2])
				if err != nil {
					b.Fatal(err)
				}
				pg.Release()
				k++
			}
		})
	}
}
