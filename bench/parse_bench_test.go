package bench

import (
	"testing"

	vmprom "github.com/VictoriaMetrics/VictoriaMetrics/lib/protoparser/prometheus"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/vllmstat/vllmstat/internal/window"
)

// The parsers side by side on the same bytes, each doing what its scraper does with a page:
//
//	cd bench && go test -run '^$' -bench . -benchmem -count 6 | tee new.txt
//	benchstat new.txt
//
// vllmstat's parse keeps only the families it reads but checks the syntax of every line;
// VictoriaMetrics splits every line into a row with its tags; Prometheus walks every entry and
// builds each sample's labels (its scrape loop then looks them up in its series cache);
// expfmt builds metric families with protobuf messages.
func BenchmarkParse(b *testing.B) {
	for _, name := range PageNames() {
		page, err := Page(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/vllmstat", func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := window.ParsePage(page); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/victoriametrics", func(b *testing.B) {
			var rows vmprom.Rows // reused across scrapes, as its scraper pools them
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if err := vmParse(&rows, page); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/prometheus", func(b *testing.B) {
			st := labels.NewSymbolTable() // one per target, kept across scrapes
			n := 0
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if err := promParse(st, page, func(*labels.Labels, float64) { n++ }); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/expfmt", func(b *testing.B) {
			tp := newTextParser()
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := expfmtParse(tp, page); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
