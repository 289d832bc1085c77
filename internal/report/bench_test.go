package report

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/timeline"
)

// synthSource makes the timelines of a large run on demand instead of reading them from disk,
// so that a benchmark of 1,000 steps × 512 workers needs no gigabytes of files.
type synthSource struct {
	workers, samples, n int
	cache               map[int64]*stepTimeline
}

func newSynthSource(workers, samples, steps int) *synthSource {
	return &synthSource{workers: workers, samples: samples, n: steps, cache: map[int64]*stepTimeline{}}
}

func (s *synthSource) steps() ([]int64, error) {
	out := make([]int64, s.n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out, nil
}

func (s *synthSource) digest(n int64) (*stepTimeline, error) {
	if d, ok := s.cache[n]; ok {
		return d, nil
	}
	d := digest(timeline.FromRecord(testStep(n, s.workers, s.samples)))
	s.cache[n] = d
	return d, nil
}

// largeRun writes the steps.jsonl of a run of the given number of steps of 512 workers.
func largeRun(t testing.TB, steps int) string {
	t.Helper()
	dir := t.TempDir()
	var b bytes.Buffer
	for n := range int64(steps) {
		r := testStep(n+1, 2, 4)
		r.Workers = 512
		line, err := step.MarshalLine(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
	}
	if err := os.WriteFile(filepath.Join(dir, "steps.jsonl"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

// BenchmarkBuild builds the report of 1,000 steps × 512 workers × 120 samples. "cold" digests
// the embedded steps' timelines (what vllmstat report does, less reading the files: see
// BenchmarkReadTimeline); "warm" reuses them, as Handler does between requests.
//
//	go test ./internal/report -run '^$' -bench Build -benchtime 3x
func BenchmarkBuild(b *testing.B) {
	dir := largeRun(b, 1000)
	warm := newSynthSource(512, 120, 1000)
	if err := writeFrom(&countWriter{}, dir, warm, Options{}, time.Unix(0, 0)); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"cold", "warm"} {
		b.Run(mode, func(b *testing.B) {
			var w countWriter
			for b.Loop() {
				src := warm
				if mode == "cold" {
					src = newSynthSource(512, 120, 1000)
				}
				w.n = 0
				if err := writeFrom(&w, dir, src, Options{}, time.Unix(0, 0)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(w.n)/(1<<20), "MiB")
		})
	}
}

// BenchmarkReadTimeline reads and digests one timeline file of 512 workers × 120 samples × 9
// series: a cold report reads one per embedded step.
func BenchmarkReadTimeline(b *testing.B) {
	dir := b.TempDir()
	r := testStep(1, 512, 120)
	for _, w := range r.Timeline.Workers {
		w.Series["prefix_cache_queries"] = w.Series["generation_tokens"]
		w.Series["prefix_cache_hits"] = w.Series["generation_tokens"]
		w.Series["prompt_tokens"] = w.Series["generation_tokens"]
	}
	path, err := timeline.Write(dir, r)
	if err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	b.SetBytes(fi.Size())
	b.ReportAllocs()
	for b.Loop() {
		f, err := timeline.Read(path)
		if err != nil {
			b.Fatal(err)
		}
		digest(f)
	}
	b.ReportMetric(float64(fi.Size())/(1<<20), "file_MiB")
}

var _ io.Writer = (*countWriter)(nil)
