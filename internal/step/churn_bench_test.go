package step

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkChurnMemory runs steps of 10 scrapes of a target whose engine label changes at every
// scrape, and reports the workers the tracker keeps and the live heap after them: the workers
// kept stay flat however many steps run (b.N), as departed workers are forgotten; the heap grows
// only by the hash by which a forgotten worker that comes back is known (about 30 bytes each).
// Compare versions with
//
//	go test ./internal/step -run '^$' -bench ChurnMemory -benchtime 2000x -count 6 | benchstat -
func BenchmarkChurnMemory(b *testing.B) {
	tr := NewTracker(Options{Scalars: true, PerWorker: true})
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	scrape := 0
	b.ReportAllocs()
	before := heapInUse()
	for n := int64(1); b.Loop(); n++ {
		for range 10 {
			scrape++
			ts = ts.Add(500 * time.Millisecond)
			tr.Observe(ts, target, mustPageText(renderPage(eng{engine: fmt.Sprint(scrape), gen: float64(scrape), running: 1})), nil)
		}
		tr.EndStep(n, ts)
	}
	b.ReportMetric(float64(int64(heapInUse())-int64(before)), "heap_B")
	b.ReportMetric(float64(tr.KeptWorkers()), "workers_kept") // after the heap, so that tr is live when it is measured
}
