package page

import (
	"bytes"
	"fmt"
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
	return func(tb testing.TB) []byte { return readPage(tb, name) }
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

// BenchmarkParserCold parses pages in full with one Parser: what a target costs when its page
// has nothing in common with the one before (each parse is a full one that also remembers).
func BenchmarkParserCold(b *testing.B) {
	for _, bp := range benchPages {
		b.Run(bp.name, func(b *testing.B) {
			body := bp.body(b)
			scrapes := [2][]byte{body, append([]byte("# another shape\n"), body...)}
			p := NewParser(Options{})
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				pg, err := p.full(scrapes[k%2])
				if err != nil {
					b.Fatal(err)
				}
				pg.Release()
				k++
			}
		})
	}
}

// editLines changes about one line in every n of page, from line off on: in turn it changes a
// label value (a new series, or a new worker where the label is engine), inserts a line of a
// new series, and drops a line.
func editLines(page []byte, n, off int) []byte {
	lines := bytes.SplitAfter(page, []byte("\n"))
	var out [][]byte
	for i, l := range lines {
		if i%n != off || len(l) == 0 {
			out = append(out, l)
			continue
		}
		switch i / n % 3 {
		case 0:
			if l[0] == '#' {
				out = append(out, []byte("# edited comment\n"))
			} else {
				out = append(out, bytes.Replace(l, []byte(`="`), []byte(`="x`), 1))
			}
		case 1:
			out = append(out, fmt.Appendf(nil, "bench_new_series{line=\"%d\"} 1\n", i), l)
		case 2: // dropped
		}
	}
	return bytes.Join(out, nil)
}

// BenchmarkParserPartial parses scrapes of one target that each differ from the one before in
// about 1% of their lines (half of them edits of the page before reverted, half new ones):
// every parse resyncs on the previous page's lines, none replays.
func BenchmarkParserPartial(b *testing.B) {
	for _, bp := range benchPages {
		b.Run(bp.name, func(b *testing.B) {
			body := bp.body(b)
			var scrapes [8][]byte
			for k := range scrapes {
				scrapes[k] = benchpage.Variant(editLines(body, 200, k%2*100), k+1)
			}
			p := NewParser(Options{})
			for range 2 {
				for _, s := range scrapes {
					pg, err := p.Parse(s)
					if err != nil {
						b.Fatal(err)
					}
					pg.Release()
				}
			}
			if p.partials != 2*len(scrapes)-1 {
				b.Fatalf("%d of %d parses resynced", p.partials, 2*len(scrapes)-1)
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

// BenchmarkParserUnrelated parses, with one Parser, two pages that share their comments only
// (every labelled sample of one has a label more): each parse resyncs and finds next to
// nothing, the cost of trying when it does not pay.
func BenchmarkParserUnrelated(b *testing.B) {
	for _, bp := range benchPages {
		b.Run(bp.name, func(b *testing.B) {
			body := bp.body(b)
			scrapes := [2][]byte{body, bytes.ReplaceAll(body, []byte("{"), []byte(`{zz="1",`))}
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
