package step

import (
	"runtime"
	"testing"
)

// markStart and markEnd mark the spans BenchmarkSpans measures, for a profiler that counts
// between function entries (callgrind's --dump-before); they do nothing.
//
//go:noinline
func markStart() {}

//go:noinline
func markEnd() {}

// BenchmarkSpans is BenchmarkEndStep's fleet (1,000 two-engine vLLM 0.20 targets, six scrapes a
// step) with two spans marked per step: the step's pages parsed and observed, then the step
// end, each after a garbage collection, so that what runs between the marks is the same from
// one run to the next. Its time is not the figure: count the spans' instructions, which do not
// depend on the machine's load (docs/performance.md says how).
func BenchmarkSpans(b *testing.B) {
	scrapes := vllmScrapes(b)
	const targets, perStep = 1000, 6
	f := newBenchFleet(scrapes, targets, NewTracker(Options{Scalars: true, NoTimeline: true}))
	tr := f.tr
	feed := func() { f.feed(b, perStep) }
	// two steps first: the parsers' first pages and the tracker's first workers
	for n := range int64(2) {
		feed()
		tr.EndStep(n+1, at(f.sec))
	}
	n := int64(3)
	for b.Loop() {
		runtime.GC()
		markStart()
		feed()
		markEnd()
		f.sec += 0.0005
		runtime.GC()
		markStart()
		tr.EndStep(n, at(f.sec))
		markEnd()
		n++
	}
}
