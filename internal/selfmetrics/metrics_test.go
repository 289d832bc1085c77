package selfmetrics

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/promtest"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// testRun is a short simulated run with per-worker records.
func testRun(t *testing.T) *promtest.Run {
	t.Helper()
	run, err := promtest.SimulateRun(promtest.RunOptions{Servers: 2, DP: 2, Steps: 4, Scrapes: 5, Interval: time.Second,
		End: time.Now(), Prefix: "vllm", PerWorker: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// feed tells m about run as a collector would, with one failed and one skipped scrape.
func feed(m *Metrics, run *promtest.Run) {
	m.TargetsChanged(run.Targets, nil)
	for _, u := range run.Targets {
		m.Scraped(&scrape.Result{Target: u, Duration: 12 * time.Millisecond, BodyBytes: 34567})
	}
	m.Scraped(&scrape.Result{Target: run.Targets[0], Duration: time.Second, FetchErr: &scrape.StatusError{Code: 503}})
	m.Scraped(&scrape.Result{Target: run.Targets[1], Duration: time.Second, FetchErr: scrape.ErrBodyTooLarge, BodyBytes: 1 << 24})
	m.Skipped(run.Targets[0])
	for i := range run.Records {
		m.StepClosed(&run.Records[i])
	}
	for _, iv := range run.Intervals {
		m.Interval(iv)
	}
	var st sink.Stats
	st.Queued.Store(2)
	st.Written.Store(40)
	st.Errors.Store(3)
	st.Dropped.Store(1)
	m.AddSink("tensorboard", &st)
	m.AddSampleSink("remote_write", &st)
}

func get(t *testing.T, h http.Handler) []byte {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

func TestPromtoolCheckMetrics(t *testing.T) {
	promtool, err := promtest.Binary("promtool")
	promtest.Require(t, err)
	m := New(Options{})
	feed(m, testRun(t))
	if _, err := m.Registry().Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
	body := get(t, m.Handler())
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	if os.Getenv("VLLMSTAT_DUMP_METRICS") != "" {
		os.WriteFile(os.Getenv("VLLMSTAT_DUMP_METRICS"), body, 0o644)
	}
}

// parse reads an exposition page into series keyed by name and sorted labels.
func parse(t *testing.T, body []byte) map[string]float64 {
	t.Helper()
	tp := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := tp.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, mt := range f.Metric {
			var v float64
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				v = mt.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				v = mt.GetCounter().GetValue()
			default:
				continue
			}
			ls := map[string]string{}
			for _, l := range mt.Label {
				ls[l.GetName()] = l.GetValue()
			}
			out[seriesKey(name, ls)] = v
		}
	}
	return out
}

func seriesKey(name string, ls map[string]string) string {
	var parts []string
	for k, v := range ls {
		if v != "" && k != "job" && k != "instance" && k != model.MetricNameLabel {
			parts = append(parts, k+"="+v)
		}
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// want returns every series WalkStep makes of r, keyed like parse's.
func want(r *step.Record) map[string]float64 {
	out := map[string]float64{}
	promname.WalkStep("vllm", r, func(name string, labels []promname.Label, v float64) {
		ls := map[string]string{}
		for _, l := range labels {
			ls[l.Name] = l.Value
		}
		out[seriesKey(name, ls)] = v
	})
	return out
}

func TestGaugesShowLastStep(t *testing.T) {
	m := New(Options{})
	run := testRun(t)
	feed(m, run)
	got := parse(t, get(t, m.Handler()))
	last := &run.Records[len(run.Records)-1]
	w := want(last)
	if len(w) < 100 {
		t.Fatalf("only %d step series; want per-worker records too", len(w))
	}
	for k, v := range w {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if strings.HasPrefix(k, "vllmstat_step_") && !strings.HasPrefix(k, "vllmstat_step_end_timestamp_seconds") {
			if _, ok := w[k]; !ok {
				t.Errorf("extra series %s", k)
			}
		}
	}
	checks := map[string]float64{
		`vllmstat_step_number{}`:                                                                     float64(last.Step),
		`vllmstat_step_vllm_kv_cache_usage_perc{stat=p95}`:                                           last.Metrics["vllm/kv_cache_usage_perc/p95"],
		`vllmstat_step_vllm_prefix_cache_hit_rate{}`:                                                 last.Metrics["vllm/prefix_cache_hit_rate"],
		`vllmstat_steps_closed_total{}`:                                                              float64(len(run.Records)),
		`vllmstat_target_up{target=` + run.Targets[0] + `}`:                                          0,
		`vllmstat_target_scrape_failures_total{reason=http_status,target=` + run.Targets[0] + `}`:    1,
		`vllmstat_target_scrape_failures_total{reason=body_too_large,target=` + run.Targets[1] + `}`: 1,
		`vllmstat_target_scrapes_total{target=` + run.Targets[1] + `}`:                               2,
		`vllmstat_target_skipped_ticks_total{target=` + run.Targets[0] + `}`:                         1,
		`vllmstat_target_scrape_body_bytes{target=` + run.Targets[0] + `}`:                           0,
		`vllmstat_targets{}`:                                     2,
		`vllmstat_sink_queue_length{sink=tensorboard}`:           2,
		`vllmstat_sink_dropped_total{sink=tensorboard}`:          1,
		`vllmstat_sink_samples_written_total{sink=remote_write}`: 40,
	}
	for k, v := range checks {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	// The last interval of every worker.
	lastIv := map[step.WorkerID]step.Interval{}
	for _, iv := range run.Intervals {
		lastIv[iv.WorkerID] = iv
	}
	if len(lastIv) != 4 {
		t.Fatalf("%d workers, want 4", len(lastIv))
	}
	for _, iv := range lastIv {
		n := 0
		promname.WalkInterval("vllm", &iv, func(name string, labels []promname.Label, v float64) {
			n++
			k := seriesKey(name, map[string]string{"target": iv.Target, "engine": iv.Engine})
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
			}
		})
		if n < 10 {
			t.Errorf("worker %v: %d interval series, want at least 10", iv.WorkerID, n)
		}
	}
	if _, ok := got[`vllmstat_interval_vllm_generation_tokens_per_second{engine=0,target=`+run.Targets[0]+`}`]; !ok {
		t.Errorf("no generation_tokens_per_second interval gauge")
	}
}

func TestRemovedTargetsLoseTheirSeries(t *testing.T) {
	m := New(Options{})
	run := testRun(t)
	feed(m, run)
	m.TargetsChanged(nil, run.Targets[:1])
	got := parse(t, get(t, m.Handler()))
	for k := range got {
		if strings.Contains(k, "target="+run.Targets[0]) && !strings.HasPrefix(k, "vllmstat_step_worker_") {
			t.Errorf("series of a removed target: %s", k)
		}
	}
	if got[`vllmstat_targets{}`] != 1 {
		t.Errorf("vllmstat_targets = %v, want 1", got[`vllmstat_targets{}`])
	}
	if _, ok := got[`vllmstat_target_up{target=`+run.Targets[1]+`}`]; !ok {
		t.Errorf("the remaining target lost its series")
	}
}

// TestPrometheusScrapesLastStep has a real Prometheus scrape the handler and checks that what
// it stored is the last closed step, series for series.
func TestPrometheusScrapesLastStep(t *testing.T) {
	prom, err := sharedPrometheus()
	promtest.Require(t, err)
	m := New(Options{})
	run := testRun(t)
	feed(m, run)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	if err := prom.SetJobs(promtest.Job{Name: "vllmstat", Targets: []string{strings.TrimPrefix(srv.URL, "http://")}, Interval: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	defer prom.SetJobs()
	last := &run.Records[len(run.Records)-1]
	w := want(last)
	ctx := t.Context()
	var got map[string]float64
	testkit.Poll(20*time.Second, func() bool {
		got = map[string]float64{}
		series, err := promtest.Query(ctx, prom.Server, `{job="vllmstat",__name__=~"vllmstat_step_.+"}`, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range series {
			got[seriesKey(s.Metric[model.MetricNameLabel], s.Metric)] = s.Samples[0].V
		}
		return len(got) > len(w)
	})
	for k, v := range w {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("Prometheus has %s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if len(got) != len(w)+1 { // + vllmstat_step_end_timestamp_seconds
		t.Errorf("Prometheus has %d step series, want %d", len(got), len(w)+1)
	}
	t.Logf("Prometheus scraped %d series of step %d", len(got), last.Step)
}

// TestRayReplicasAreSeriesOfTheirOwn: two Ray replicas with engine "0" on one node are two
// workers, told apart by worker_labels, so /metrics shows both and a worker without labels
// beside them keeps the same label names.
func TestRayReplicasAreSeriesOfTheirOwn(t *testing.T) {
	m := New(Options{Prefix: "vllm"})
	const node = "http://10.0.0.5:8080/metrics"
	rec := &step.Record{Step: 1, Workers: 3, PerWorker: []step.WorkerRecord{
		{Target: node, Engine: "0", Labels: map[string]string{"ReplicaId": "a", "WorkerId": "w1"}, Metrics: map[string]float64{"vllm/generation_tokens": 10}},
		{Target: node, Engine: "0", Labels: map[string]string{"ReplicaId": "b", "WorkerId": "w2"}, Metrics: map[string]float64{"vllm/generation_tokens": 20}},
		{Target: "http://10.0.0.6:8000/metrics", Engine: "0", Metrics: map[string]float64{"vllm/generation_tokens": 30}},
	}}
	m.StepClosed(rec)
	for i, w := range rec.PerWorker {
		m.Interval(step.Interval{WorkerID: step.WorkerID{Target: w.Target, Engine: w.Engine, Labels: page.LabelKey(w.Labels)},
			TS: time.Unix(1700000000, 0), Values: []step.IntervalValue{{Key: "num_requests_running", V: float64(i + 1)}}})
	}
	got := parse(t, get(t, m.Handler()))
	wantWorker := map[string]float64{
		`ReplicaId="a",WorkerId="w1"`: 10,
		`ReplicaId="b",WorkerId="w2"`: 20,
		``:                            30,
	}
	for labels, v := range wantWorker {
		target := node
		if labels == "" {
			target = "http://10.0.0.6:8000/metrics"
		}
		ls := map[string]string{"target": target, "engine": "0"}
		if labels != "" {
			ls["worker_labels"] = labels
		}
		k := seriesKey("vllmstat_step_worker_vllm_generation_tokens", ls)
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	n := 0
	for k := range got {
		if strings.HasPrefix(k, "vllmstat_interval_vllm_num_requests_running") {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d interval series of running requests, want one per worker (3)", n)
	}
}

// TestIntervalKeepsItsValues checks that the interval gauges show each worker's last values
// although the tracker hands every interval the same list and overwrites it after the call.
func TestIntervalKeepsItsValues(t *testing.T) {
	m := New(Options{Prefix: "vllm"})
	var shared []step.IntervalValue
	for i, target := range []string{"http://10.0.0.1:8000/metrics", "http://10.0.0.2:8000/metrics", "http://10.0.0.1:8000/metrics"} {
		shared = append(shared[:0], step.IntervalValue{Key: "num_requests_running", V: float64(i + 1)})
		m.Interval(step.Interval{WorkerID: step.WorkerID{Target: target, Engine: "0"}, TS: time.Unix(1700000000, 0), Values: shared})
		shared[0] = step.IntervalValue{Key: "num_requests_waiting", V: -1}
	}
	got := parse(t, get(t, m.Handler()))
	for target, want := range map[string]float64{"http://10.0.0.1:8000/metrics": 3, "http://10.0.0.2:8000/metrics": 2} {
		k := seriesKey("vllmstat_interval_vllm_num_requests_running", map[string]string{"target": target, "engine": "0"})
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
}
