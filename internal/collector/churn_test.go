package collector

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/selfmetrics"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// countingObserver passes every call on to vllmstat's own metrics and counts the scrapes.
type countingObserver struct {
	*selfmetrics.Metrics
	mu      sync.Mutex
	scraped int
}

func (o *countingObserver) Scraped(res *scrape.Result) {
	o.Metrics.Scraped(res)
	o.mu.Lock()
	o.scraped++
	o.mu.Unlock()
}

func (o *countingObserver) count() int { o.mu.Lock(); defer o.mu.Unlock(); return o.scraped }

// churn is a collector over one target whose page has one engine with a new engine label at
// every answer (a server that numbers its engines anew on each restart), observed by vllmstat's
// own metrics.
type churn struct {
	t       *testing.T
	c       *Collector
	fc      *clock.Fake
	obs     *countingObserver
	answers atomic.Int64
	stop    func()
}

func startChurn(t *testing.T, lim page.Limits, rw *record.Writer) *churn {
	ch := &churn{t: t}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := ch.answers.Add(1)
		fmt.Fprintf(w, "vllm:generation_tokens_total{engine=\"e%d\",model_name=\"m\"} %d\nvllm:num_requests_running{engine=\"e%d\",model_name=\"m\"} 1\n", i, 10*i, i)
	}))
	t.Cleanup(srv.Close)
	self := selfmetrics.New(selfmetrics.Options{})
	ch.obs = &countingObserver{Metrics: self}
	c, fc, stop := start(t, Options{Options: scrape.Options{Limits: lim}, Targets: targets(srv.URL), NoFinalStep: true, Observer: ch.obs, Recorder: rw,
		Tracker: step.Options{OnInterval: self.Interval}})
	stopped := false
	ch.stop = func() {
		if !stopped {
			stopped = true
			if err := stop(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(ch.stop)
	ch.c, ch.fc = c, fc
	testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { return ch.obs.count() == 1 })
	return ch
}

// scrape takes k scrapes on ticks, each observed before the next.
func (ch *churn) scrape(k int) {
	ch.t.Helper()
	for range k {
		n := ch.obs.count() + 1
		ch.fc.Advance(time.Second)
		testkit.WaitFor(ch.t, 5*time.Second, fmt.Sprintf("scrape %d", n), func() bool { return ch.obs.count() == n })
	}
}

func (ch *churn) endStep(n int64) step.Record {
	ch.t.Helper()
	r, err := ch.c.EndStep(context.Background(), n)
	if err != nil {
		ch.t.Fatal(err)
	}
	return r
}

// kept is how many workers the tracker keeps state for.
func (ch *churn) kept() int {
	ch.t.Helper()
	var n int
	if err := ch.c.call(context.Background(), func(s *state) { n = s.tracker.KeptWorkers() }); err != nil {
		ch.t.Fatal(err)
	}
	return n
}

// intervalSeries counts the workers whose last interval /metrics shows (one
// vllmstat_interval_timestamp_seconds series each).
func (ch *churn) intervalSeries() int {
	ch.t.Helper()
	return len(ch.served()["vllmstat_interval_timestamp_seconds"].GetMetric())
}

// served reads the families /metrics serves.
func (ch *churn) served() map[string]*dto.MetricFamily {
	ch.t.Helper()
	rec := httptest.NewRecorder()
	ch.obs.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	tp := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := tp.TextToMetricFamilies(rec.Body)
	if err != nil {
		ch.t.Fatal(err)
	}
	return fams
}

// TestChurningWorkersAreForgotten closes 40 steps of a target whose engine label changes at every
// scrape: a worker absent from every page of a step is forgotten at its close, with its
// interval series, so what the tracker and /metrics hold stays that of the last step's workers
// instead of growing with every scrape.
func TestChurningWorkersAreForgotten(t *testing.T) {
	const perStep = 5 // scrapes on ticks, and a boundary scrape: 6 workers per step
	ch := startChurn(t, page.Limits{}, nil)
	for n := int64(1); n <= 40; n++ {
		ch.scrape(perStep)
		r := ch.endStep(n)
		if n == 1 && r.Workers != perStep+2 { // with the scrape at start
			t.Fatalf("step 1 had %d workers, want %d", r.Workers, perStep+2)
		}
		if k, s := ch.kept(), ch.intervalSeries(); k > perStep+2 || s > perStep+2 {
			t.Fatalf("after step %d: the tracker keeps %d workers and /metrics shows %d interval series; want at most those of the step, %d",
				n, k, s, perStep+2)
		}
	}
	if k, s := ch.kept(), ch.intervalSeries(); k != perStep+1 || s != perStep+1 {
		t.Errorf("after the last step: the tracker keeps %d workers and /metrics shows %d interval series, want the step's %d", k, s, perStep+1)
	}
}

// TestWorkersPerStepLimit: max_workers_per_target bounds the workers a target has had within a
// step, not only those on one page: once a churning target has had 4, its pages with a fifth
// are failed scrapes (reason limit) until the step closes.
func TestWorkersPerStepLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	rw, err := record.Create(path, record.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ch := startChurn(t, page.Limits{MaxWorkers: 4}, rw)
	var live []step.Record
	for n := int64(1); n <= 3; n++ {
		ch.scrape(6)
		r := ch.endStep(n)
		live = append(live, r)
		over := 3 // 6 ticks and the boundary scrape, 4 of them within the limit
		if n == 1 {
			over = 4 // and the scrape at start
		}
		if r.Workers != 4 || r.Scrapes.OK != 4 || r.Scrapes.Failed != over {
			t.Errorf("step %d: %d workers, %+v scrapes; want 4 workers, 4 scrapes ok and %d over the limit", n, r.Workers, r.Scrapes, over)
		}
	}
	_, ts, err := ch.c.Live(context.Background())
	if err != nil || len(ts) != 1 || ts[0].reason != "limit" || !strings.Contains(ts[0].LastError, "workers (engines) of the target within the step") {
		t.Errorf("target states %+v %v, want it down over the limit", ts, err)
	}
	if n := ch.limitFailures(); n != 10 {
		t.Errorf("vllmstat_target_scrape_failures_total{reason=\"limit\"} = %v, want 10", n)
	}
	ch.stop()
	// The recording holds the pages over the limit as failed scrapes: replay counts them so.
	replayed := replayRecording(t, path, step.Options{})
	if len(replayed) != len(live) {
		t.Fatalf("replayed %d steps, live %d", len(replayed), len(live))
	}
	for i := range live {
		a, _ := step.MarshalLine(&live[i])
		b, _ := step.MarshalLine(&replayed[i])
		if string(a) != string(b) {
			t.Errorf("step %d differs:\nlive   %s\nreplay %s", live[i].Step, a, b)
		}
	}
}

// limitFailures is the target's failed scrapes over its limits, as /metrics counts them.
func (ch *churn) limitFailures() float64 {
	ch.t.Helper()
	var n float64
	for _, m := range ch.served()["vllmstat_target_scrape_failures_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" && l.GetValue() == "limit" {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
