package bench

import (
	"testing"

	vmprom "github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/vllmstat/vllmstat/internal/benchpage"
	"github.com/vllmstat/vllmstat/internal/page"
)

// The parsers side by side on the same bytes, each doing what its scraper does with a page:
//
//	cd bench && go test -run '^$' -bench . -benchmem -count 6 | tee new.txt
//	benchstat new.txt
//
// vllmstat's parse keeps only the families it reads but checks the syntax of every line: cold
// is a page parsed on its own (page.ParsePage), warm a target's next page read by the shape of
// its previous one (page.Parser);
// VictoriaMetrics splits every line into a row with its tags; Prometheus walks every entry and
// builds each sample's labels (its scrape loop then looks them up in its series cache);
// expfmt builds metric families with protobuf messages.
func BenchmarkParse(b *testing.B) {
	for _, name := range PageNames() {
		body, err := Page(name)
		if err != nil {
			b.Fatal(err)
		}
		// Successive scrapes of one target: the page's lines with values moved. Every parser
		// reads the same bytes in the same order.
		scrapes := make([][]byte, 8)
		size := 0
		for k := range scrapes {
			scrapes[k] = benchpage.Variant(body, k+1)
			size += len(scrapes[k])
		}
		size /= len(scrapes)
		run := func(b *testing.B, parse func([]byte) error) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				if err := parse(scrapes[k%len(scrapes)]); err != nil {
					b.Fatal(err)
				}
				k++
			}
		}
		b.Run(name+"/vllmstat-cold", func(b *testing.B) {
			run(b, func(s []byte) error {
				_, err := page.ParsePage(s)
				return err
			})
		})
		b.Run(name+"/vllmstat-warm", func(b *testing.B) {
			// one Parser per target, each page released before the next scrape, as the
			// collector does
			p := page.NewParser(page.Options{})
			run(b, func(s []byte) error {
				pg, err := p.Parse(s)
				if err == nil {
					pg.Release()
				}
				return err
			})
		})
		b.Run(name+"/victoriametrics", func(b *testing.B) {
			var rows vmprom.Rows // reused across scrapes, as its scraper pools them
			run(b, func(s []byte) error { return vmParse(&rows, s) })
		})
		b.Run(name+"/prometheus", func(b *testing.B) {
			st := labels.NewSymbolTable() // one per target, kept across scrapes
			n := 0
			run(b, func(s []byte) error {
				return promParse(st, s, func(*labels.Labels, float64) { n++ })
			})
		})
		b.Run(name+"/expfmt", func(b *testing.B) {
			tp := newTextParser()
			run(b, func(s []byte) error {
				_, err := expfmtParse(tp, s)
				return err
			})
		})
	}
}
