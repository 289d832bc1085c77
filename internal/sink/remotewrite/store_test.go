package remotewrite

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/promtest"
)

// One Prometheus and one VictoriaMetrics for the package's tests, each started by the first
// test that needs it and stopped by TestMain.
var (
	promOnce, vmOnce sync.Once
	prom             *promtest.Prometheus
	vm               *promtest.Server
	promErr, vmErr   error
)

func sharedPrometheus() (*promtest.Prometheus, error) {
	promOnce.Do(func() { prom, promErr = promtest.StartPrometheus() })
	return prom, promErr
}

func sharedVictoriaMetrics() (*promtest.Server, error) {
	vmOnce.Do(func() { vm, vmErr = promtest.StartVictoriaMetrics() })
	return vm, vmErr
}

func TestMain(m *testing.M) {
	code := m.Run()
	prom.Close()
	vm.Close()
	os.Exit(code)
}

// push writes the shared run's steps and intervals to url under a run label of its own, and
// returns the samples the store should now hold, keyed like the stored series.
func push(t *testing.T, url, runID string) (map[string][][2]float64, int) {
	t.Helper()
	run := testRun(t)
	s := DefaultSettings()
	s.URL = url
	s.BatchSize = 500
	s.Intervals = true
	s.ExtraLabels = []promname.Label{{Name: "job", Value: "rl"}, {Name: "run", Value: runID}}
	log, lb := newLog()
	w := newWriter(s, "vllm", log)
	// As in a run: intervals as the tracker makes them, each step when it closes.
	next := 0
	for i := range run.Records {
		for next < len(run.Intervals) && !run.Intervals[next].TS.After(run.Records[i].End) {
			w.Interval(run.Intervals[next])
			next++
		}
		if err := w.Write(t.Context(), &run.Records[i]); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Dropped.Load() != 0 || st.Errors.Load() != 0 {
		t.Fatalf("dropped %d, errors %d: %s", st.Dropped.Load(), st.Errors.Load(), lb.String())
	}
	return expected(run.Records, run.Intervals, s.ExtraLabels)
}

// stored turns a store's answer into the same shape as expected's.
func stored(series []promtest.Series) (map[string][][2]float64, int) {
	out := map[string][][2]float64{}
	n := 0
	for _, s := range series {
		var ls []string
		for k, v := range s.Metric {
			if k != "__name__" {
				ls = append(ls, k+"="+v)
			}
		}
		sort.Strings(ls)
		k := strings.Join(append([]string{"__name__=" + s.Metric["__name__"]}, ls...), ",")
		for _, p := range s.Samples {
			out[k] = append(out[k], [2]float64{p.V, float64(p.T)})
			n++
		}
	}
	return out, n
}

func TestPrometheusStoresEverySample(t *testing.T) {
	p, err := sharedPrometheus()
	promtest.Require(t, err)
	runID := fmt.Sprintf("prom-%d", time.Now().UnixNano())
	want, n := push(t, p.RemoteWriteURL(), runID)
	run := testRun(t)
	first, last := run.Records[0], run.Records[len(run.Records)-1]
	span := last.End.Sub(first.Start) + time.Minute
	// A range selector returns the raw samples.
	series, err := promtest.Query(t.Context(), p.Server, fmt.Sprintf(`{run=%q}[%ds]`, runID, int(span.Seconds())), last.End.Add(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	got, m := stored(series)
	compare(t, got, want)
	if m != n {
		t.Errorf("Prometheus holds %d samples, want %d", m, n)
	}
	// A range query evaluated at the step ends sees each step's value.
	every := last.End.Sub(run.Records[len(run.Records)-2].End)
	series, err = promtest.QueryRange(t.Context(), p.Server, fmt.Sprintf(`vllmstat_step_vllm_prefix_cache_hit_rate{run=%q,stat=""}`, runID), first.End, last.End, every)
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 1 || len(series[0].Samples) != len(run.Records) {
		t.Fatalf("query_range: %v", series)
	}
	checked := 0
	for i, s := range series[0].Samples {
		r := &run.Records[i]
		v, ok := r.Metrics["vllm/prefix_cache_hit_rate"]
		if s.T != r.End.UnixMilli() {
			t.Errorf("query_range point %d at %d, want step %d's end %d", i, s.T, r.Step, r.End.UnixMilli())
		}
		if !ok { // a step without prefix-cache queries has no hit rate; the lookback shows an older one
			continue
		}
		checked++
		if s.V != v {
			t.Errorf("step %d: query_range has %v, want %v", r.Step, s.V, v)
		}
	}
	if checked < 3 {
		t.Errorf("only %d steps with a hit rate", checked)
	}
	t.Logf("Prometheus: %d series, %d samples, equal", len(got), m)
}

func TestVictoriaMetricsStoresEverySample(t *testing.T) {
	v, err := sharedVictoriaMetrics()
	promtest.Require(t, err)
	runID := fmt.Sprintf("vm-%d", time.Now().UnixNano())
	want, n := push(t, v.URL+"/api/v1/write", runID)
	run := testRun(t)
	first, last := run.Records[0], run.Records[len(run.Records)-1]
	if err := promtest.Flush(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	series, err := promtest.Export(t.Context(), v, fmt.Sprintf(`{run=%q}`, runID), first.Start.Add(-time.Minute), last.End.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got, m := stored(series)
	// VictoriaMetrics keeps values as decimals of about 12 significant digits
	// (0.5247395833333334 comes back as 0.524739583333); timestamps are exact.
	rounded := 0
	for k, ss := range got {
		w := want[k]
		for i := range min(len(ss), len(w)) {
			if d := ss[i][0] - w[i][0]; d != 0 && d <= 1e-11*abs(w[i][0]) && d >= -1e-11*abs(w[i][0]) {
				ss[i][0] = w[i][0]
				rounded++
			}
		}
	}
	compare(t, got, want)
	if m != n {
		t.Errorf("VictoriaMetrics holds %d samples, want %d", m, n)
	}
	t.Logf("VictoriaMetrics: %d series, %d samples, equal (%d values within 1e-11 relative, the rest exact)", len(got), m, rounded)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
