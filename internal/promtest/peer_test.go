package promtest_test

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/collector"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/promtest"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/selfmetrics"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/sink/remotewrite"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// counters are the counter families whose per-step increases vllmstat reports, by their
// simulator total key; request_success is split by finished_reason.
var counters = []string{"prefix_cache_queries", "prefix_cache_hits", "num_preemptions", "prompt_tokens", "generation_tokens", "request_success"}

// TestPeerCheck runs a simulated fleet through a whole workload, scraped at the same time by
// vllmstat's collector (closing a step every 5 s, sending it to Prometheus by remote write, its
// own /metrics scraped by Prometheus) and by Prometheus itself. Then, for every counter:
//   - the increases summed over vllmstat's steps equal the simulator's own totals exactly;
//   - so do Prometheus' raw samples (last - first per series), and so does what vllmstat wrote
//     to Prometheus (sum_over_time of the step series);
//   - Prometheus' increase() over the whole run equals the raw increase times its
//     extrapolation factor (recomputed here from the raw samples' times, to 1e-9 relative),
//     and that factor is at most 1 + 1.1 × scrape interval / sampled span: the first sample is
//     0, so nothing is added at the start, and the end is extended by less than 1.1 average
//     scrape intervals.
func TestPeerCheck(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("SKIPPED, NOT TESTED: a 40-second run; CI runs it")
	}
	prom, err := promtest.StartPrometheus()
	promtest.Require(t, err)
	defer prom.Close()
	ctx := t.Context()

	metrics := selfmetrics.New(selfmetrics.Options{})
	self := httptest.NewServer(metrics.Handler())
	defer self.Close()

	// The fleet binds free ports (port 0) and its wall clock stands still until Prometheus,
	// which applies new targets only every few seconds, has scraped its idle pages.
	cfg := sim.DefaultConfig()
	cfg.Servers, cfg.DP, cfg.Seed = 2, 2, 11
	cfg.Workload.Batches = 3
	cfg.Workload.StartDelay = 3 * time.Second // both scrapers see the idle pages first
	cfg.Workload.Pause = time.Second
	cfg.Port = 0
	clk := newGatedClock()
	cfg.Clock = clk
	fleetStart := time.Now()
	fleet, err := sim.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	var simTargets []string
	for _, u := range fleet.URLs() {
		simTargets = append(simTargets, strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/metrics"))
	}
	if err := prom.SetJobs(
		promtest.Job{Name: "sim", Targets: simTargets, Interval: time.Second},
		promtest.Job{Name: "vllmstat", Targets: []string{strings.TrimPrefix(self.URL, "http://")}, Interval: time.Second},
	); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "Prometheus to scrape the idle fleet", func() bool {
		up, err := promtest.Query(ctx, prom.Server, `up{job="sim"} == 1`, time.Now())
		return err == nil && len(up) == cfg.Servers
	})

	set := remotewrite.DefaultSettings()
	set.URL = prom.RemoteWriteURL()
	set.Intervals = true
	set.ExtraLabels = []promname.Label{{Name: "run", Value: "peer"}}
	rw := remotewrite.NewWithSettings(set, "vllm", nil)
	sinks := sink.NewRuntime(nil)
	steps := sinks.Add(rw, sink.LaneOptions{Name: "remote_write"})
	metrics.AddSink("remote_write", steps)
	metrics.AddSampleSink("remote_write", rw.Stats())

	var recs []step.Record
	c := collector.New(collector.Options{
		Options: scrape.Options{Timeout: 400 * time.Millisecond, MaxBody: scrape.DefaultMaxBody, Client: scrape.NewClient()},
		Targets: config.TargetsOf(fleet.URLs()), Interval: 500 * time.Millisecond, StepEvery: 5 * time.Second,
		Tracker: step.Options{Prefix: "vllm", PerWorker: true, Scalars: true, OnInterval: func(iv step.Interval) {
			metrics.Interval(iv)
			sinks.Interval(iv)
		}},
		Sinks:    []sink.Sink{sinks},
		OnStep:   func(r *step.Record) { recs = append(recs, *r) },
		Observer: metrics,
	})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	sinks.Start()
	go func() { errc <- c.Run(runCtx) }()
	clk.open()

	for done := 0; done < cfg.Workload.Batches; {
		select {
		case <-fleet.Batches():
			done++
		case <-time.After(90 * time.Second):
			t.Fatalf("only %d of %d batches done after 90s", done, cfg.Workload.Batches)
		}
	}
	// Both scrapers see the pages at rest: Prometheus scrapes the fleet once more, and the
	// collector's shutdown makes a boundary scrape.
	testkit.WaitFor(t, 20*time.Second, "Prometheus to scrape the fleet at rest", scrapedSince(ctx, prom, "sim", time.Now()))
	stop()
	if err := <-errc; err != nil {
		t.Fatalf("collector: %v", err)
	}
	if err := sinks.Close(ctx); err != nil {
		t.Fatalf("sinks: %v", err)
	}
	totals := fleet.Totals()
	testkit.WaitFor(t, 20*time.Second, "Prometheus to scrape vllmstat's /metrics once more", scrapedSince(ctx, prom, "vllmstat", time.Now()))
	end := time.Now().Truncate(time.Millisecond)
	span := int(math.Ceil(end.Sub(fleetStart).Seconds())) + 5
	// A scrape stamped before end may be stored after it (later still on a loaded machine):
	// the queries below must all see it, so they wait for the fleet's next scrape, stamped after.
	testkit.WaitFor(t, 20*time.Second, "Prometheus to store every scrape of the fleet stamped before the end", scrapedSince(ctx, prom, "sim", end))
	t.Logf("run of %s: %d steps", end.Sub(fleetStart).Round(time.Millisecond), len(recs))

	// Totals of vllmstat's steps, and of the simulator, per key ("request_success/stop", ...).
	mine := map[string]float64{}
	for _, r := range recs {
		for k, v := range r.Metrics {
			name := strings.TrimPrefix(k, "vllm/")
			base, rest, _ := strings.Cut(name, "/")
			if base == "request_success" && rest != "" || rest == "" && contains(counters, base) {
				mine[name] += v
			}
		}
	}
	for _, c := range counters {
		if c != "request_success" && totals[c] == 0 {
			t.Errorf("the simulator counted no %s; the run shows nothing", c)
		}
	}
	for k, want := range totals {
		base, _, _ := strings.Cut(k, "/")
		if !contains(counters, base) {
			continue
		}
		if mine[k] != want {
			t.Errorf("%s: vllmstat's steps add up to %v, the simulator counted %v", k, mine[k], want)
		}
	}

	for _, c := range counters {
		checkPrometheus(ctx, t, prom, c, span, end, totals, mine)
	}

	// vllmstat's own /metrics, as Prometheus scraped it last, shows the last step.
	last := recs[len(recs)-1]
	series, err := promtest.Query(ctx, prom.Server, `vllmstat_step_number{job="vllmstat"}`, end)
	if err != nil || len(series) != 1 || series[0].Samples[0].V != float64(last.Step) {
		t.Errorf("scraped vllmstat_step_number = %v (%v), want %d", series, err, last.Step)
	}
	if st := rw.Stats(); st.Dropped.Load() != 0 || steps.Dropped.Load() != 0 {
		t.Errorf("remote write dropped %d samples, %d steps", st.Dropped.Load(), steps.Dropped.Load())
	}
}

// checkPrometheus compares Prometheus' view of counter family c with the simulator's totals
// and vllmstat's.
func checkPrometheus(ctx context.Context, t *testing.T, prom *promtest.Prometheus, c string, span int, end time.Time, totals, mine map[string]float64) {
	t.Helper()
	sel := fmt.Sprintf(`vllm:%s_total{job="sim"}[%ds]`, c, span)
	raw, err := promtest.Query(ctx, prom.Server, sel, end)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := promtest.Query(ctx, prom.Server, "increase("+sel+")", end)
	if err != nil {
		t.Fatal(err)
	}
	incBy := map[string]float64{}
	for _, s := range inc {
		incBy[labelKey(s.Metric)] = s.Samples[0].V
	}
	rangeStart, rangeEnd := end.UnixMilli()-int64(span)*1000, end.UnixMilli()
	rawSum := map[string]float64{} // by simulator key
	var incSum, rawTotal float64
	worst := 0.0
	for _, s := range raw {
		key := c
		if r := s.Metric["finished_reason"]; r != "" {
			key += "/" + r
		}
		ps := s.Samples
		if ps[0].V != 0 {
			t.Errorf("%s %v: first sample %v, want 0: Prometheus started scraping after the workload", c, s.Metric, ps[0].V)
		}
		delta := ps[len(ps)-1].V - ps[0].V
		for i := 1; i < len(ps); i++ {
			if ps[i].V < ps[i-1].V {
				delta += ps[i-1].V // a reset, as increase() reads it
			}
		}
		rawSum[key] += delta
		rawTotal += delta
		want, factor, bound := extrapolated(ps, delta, rangeStart, rangeEnd)
		got, ok := incBy[labelKey(s.Metric)]
		if !ok {
			if len(ps) >= 2 {
				t.Errorf("%s %v: no increase() result", c, s.Metric)
			}
			continue
		}
		incSum += got
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s %v: increase() = %v; raw increase %v × extrapolation %v = %v", c, s.Metric, got, delta, factor, want)
		}
		if delta == 0 {
			continue // nothing to extrapolate
		}
		if factor < 1 || factor > bound {
			t.Errorf("%s %v: extrapolation factor %v outside [1, %v]", c, s.Metric, factor, bound)
		}
		worst = math.Max(worst, factor-1)
	}
	for k, v := range rawSum {
		if v != totals[k] {
			t.Errorf("%s: Prometheus' raw samples increase by %v, the simulator counted %v", k, v, totals[k])
		}
	}
	// What vllmstat wrote to Prometheus adds up the same.
	for k := range rawSum {
		name, reason, _ := strings.Cut(k, "/")
		m := fmt.Sprintf(`vllmstat_step_vllm_%s{run="peer",stat=""}`, name)
		if reason != "" {
			m = fmt.Sprintf(`vllmstat_step_vllm_%s{run="peer",reason=%q}`, name, reason)
		}
		got, err := promtest.Query(ctx, prom.Server, fmt.Sprintf("sum_over_time(%s[%ds])", m, span), end)
		if err != nil {
			t.Fatal(err)
		}
		v := 0.0
		if len(got) == 1 {
			v = got[0].Samples[0].V
		}
		if v != mine[k] {
			t.Errorf("%s: the remote-written steps add up to %v in Prometheus, vllmstat's to %v", k, v, mine[k])
		}
	}
	t.Logf("%-20s simulator %10.0f  vllmstat %10.0f  Prometheus raw %10.0f  increase() %12.3f (%+.3f%%, largest series extrapolation %+.3f%%)",
		c, sumPrefix(totals, c), sumPrefix(mine, c), rawTotal, incSum, 100*(incSum/rawTotal-1), 100*worst)
}

// extrapolated recomputes Prometheus' increase() of one counter series from its raw samples in
// (rangeStart, rangeEnd], as Prometheus 2.42's extrapolatedRate does: the raw increase times
// (sampled span + extension at each end) / sampled span. It also returns the bound the factor
// must keep when the first sample is 0: 1 + 1.1 × the average interval / the sampled span.
func extrapolated(ps []promtest.Sample, delta float64, rangeStart, rangeEnd int64) (v, factor, bound float64) {
	if len(ps) < 2 {
		return 0, 1, 1
	}
	first, last := ps[0], ps[len(ps)-1]
	toStart := float64(first.T-rangeStart) / 1000
	toEnd := float64(rangeEnd-last.T) / 1000
	sampled := float64(last.T-first.T) / 1000
	avg := sampled / float64(len(ps)-1)
	if delta > 0 && first.V >= 0 {
		if toZero := sampled * (first.V / delta); toZero < toStart {
			toStart = toZero
		}
	}
	ext := sampled
	threshold := avg * 1.1
	if toStart < threshold {
		ext += toStart
	} else {
		ext += avg / 2
	}
	if toEnd < threshold {
		ext += toEnd
	} else {
		ext += avg / 2
	}
	factor = ext / sampled
	return delta * factor, factor, 1 + threshold/sampled
}

func labelKey(m map[string]string) string {
	var ps []string
	for k, v := range m {
		if k != "__name__" {
			ps = append(ps, k+"="+v)
		}
	}
	sort.Strings(ps)
	return strings.Join(ps, ",")
}

func sumPrefix(m map[string]float64, c string) float64 {
	s := 0.0
	for k, v := range m {
		if k == c || strings.HasPrefix(k, c+"/") {
			s += v
		}
	}
	return s
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// scrapedSince reports whether Prometheus has scraped every target of job after t.
func scrapedSince(ctx context.Context, prom *promtest.Prometheus, job string, t time.Time) func() bool {
	return func() bool {
		last, err := promtest.Query(ctx, prom.Server, fmt.Sprintf(`min(timestamp(up{job=%q}))`, job), time.Now())
		return err == nil && len(last) == 1 && len(last[0].Samples) == 1 &&
			last[0].Samples[0].V > float64(t.UnixMilli())/1000
	}
}

// gatedClock is a fleet's wall clock that stands at its first reading until open, then runs
// with the real clock from there.
type gatedClock struct {
	t0     time.Time
	opened chan struct{}
	once   sync.Once
	at     time.Time // when open was called; read only after opened is closed
}

func newGatedClock() *gatedClock { return &gatedClock{t0: time.Now(), opened: make(chan struct{})} }

func (c *gatedClock) open() { c.once.Do(func() { c.at = time.Now(); close(c.opened) }) }

func (c *gatedClock) Now() time.Time {
	select {
	case <-c.opened:
		return c.t0.Add(time.Since(c.at))
	default:
		return c.t0
	}
}

// NewTimer and NewTicker wait real time either way: before open, the fleet's loop ticks on an
// unmoving clock.
func (c *gatedClock) NewTimer(d time.Duration) clock.Timer { return clock.Real{}.NewTimer(d) }

func (c *gatedClock) NewTicker(d time.Duration) clock.Ticker { return clock.Real{}.NewTicker(d) }
