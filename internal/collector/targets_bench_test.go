package collector

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/selfmetrics"
	"github.com/vllmstat/vllmstat/internal/target"
)

// blockingTransport holds every request until its context ends: targets that never answer, so
// that a benchmark of target changes times the changes, not scrapes.
type blockingTransport struct{}

func (blockingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// BenchmarkTargetChanges adds n targets to a running collector in one call and removes them
// in another, with vllmstat's self-metrics observing, as the API and discovery do. Besides the
// time of each change (add-ms, remove-ms), it reports how long the slowest of the calls that
// another goroutine makes meanwhile, every millisecond, waited for the collector (max-wait-ms):
// a change is applied in batches, between which the collector serves its other work. The
// cost per target should not grow with n:
//
//	go test ./internal/collector -run '^$' -bench TargetChanges -benchtime 3x -count 6 | tee new.txt
//	benchstat old.txt new.txt
func BenchmarkTargetChanges(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 50_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			ts := make([]target.Target, n)
			urls := make([]string, n)
			for i := range ts {
				urls[i] = fmt.Sprintf("http://10.%d.%d.%d:8000/metrics", i>>16, i>>8&255, i&255)
				ts[i] = target.Target{URL: urls[i]}
			}
			c := New(Options{Options: scrape.Options{Timeout: time.Minute}, Interval: time.Hour, NoFinalStep: true,
				Observer: selfmetrics.New(selfmetrics.Options{})})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			defer func() { cancel(); <-done }()

			stop := make(chan struct{})
			var wg sync.WaitGroup
			var maxWait time.Duration
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
					t0 := time.Now()
					if err := c.call(ctx, func(*state) {}); err != nil {
						return
					}
					maxWait = max(maxWait, time.Since(t0))
				}
			})
			var add, remove time.Duration
			for b.Loop() {
				t0 := time.Now()
				if err := c.SetTargets(ctx, ts); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := c.RemoveTargets(ctx, urls); err != nil {
					b.Fatal(err)
				}
				add += t1.Sub(t0)
				remove += time.Since(t1)
			}
			close(stop)
			wg.Wait()
			b.ReportMetric(float64(add.Microseconds())/1e3/float64(b.N), "add-ms/op")
			b.ReportMetric(float64(remove.Microseconds())/1e3/float64(b.N), "remove-ms/op")
			b.ReportMetric(float64(maxWait.Microseconds())/1e3, "max-wait-ms")
		})
	}
}
