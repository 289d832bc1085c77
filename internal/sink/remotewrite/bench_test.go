package remotewrite

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/klauspost/compress/snappy"

	"github.com/vllmstat/vllmstat/internal/promname"
)

// go test -run '^$' -bench . -count 6 ./internal/sink/remotewrite | tee new.txt; benchstat old.txt new.txt

// BenchmarkWriteStep sends one step of 4 workers with per-worker records to a receiver that
// reads and discards the body.
func BenchmarkWriteStep(b *testing.B) {
	run := testRun(&testing.T{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	w := newWriter(testSettings(srv.URL), "vllm", nil)
	rec := &run.Records[len(run.Records)-1]
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Write(context.Background(), rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(w.Stats().Written.Load())/float64(b.N), "samples/op")
}

// BenchmarkInterval buffers one worker's interval, the caller's cost on the collector goroutine,
// while the writer's goroutine sends to a receiver that discards.
func BenchmarkInterval(b *testing.B) {
	run := testRun(&testing.T{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	s := testSettings(srv.URL)
	s.Intervals = true
	s.BatchSize = 2000
	w := newWriter(s, "vllm", nil)
	defer w.Close(context.Background())
	iv := run.Intervals[len(run.Intervals)-1]
	b.ReportAllocs()
	for b.Loop() {
		w.Interval(iv)
	}
	b.ReportMetric(float64(w.Stats().Dropped.Load())/float64(b.N), "dropped/op")
}

// BenchmarkEncode encodes a batch of 2000 interval samples (before compression).
func BenchmarkEncode(b *testing.B) {
	run := testRun(&testing.T{})
	var batch []sample
	cache := map[string]*series{}
	for i := 0; len(batch) < 2000; i++ {
		iv := run.Intervals[i%len(run.Intervals)]
		promname.WalkInterval("vllm", &iv, func(name string, ls []promname.Label, v float64) {
			k := name + iv.Target + iv.Engine
			if cache[k] == nil {
				cache[k] = newSeries(name, ls, testExtra)
			}
			batch = append(batch, sample{cache[k], iv.TS.UnixMilli(), v})
		})
	}
	b.ReportAllocs()
	var out []byte
	for b.Loop() {
		out = encode(out[:0], batch[:2000])
	}
	b.ReportMetric(float64(len(out))/2000, "bytes/sample")
	b.ReportMetric(float64(len(snappy.Encode(nil, out)))/2000, "snappy-bytes/sample")
}
