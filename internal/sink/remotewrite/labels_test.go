package remotewrite

import (
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/step"
)

// TestTargetLabelsOnWorkerSeries: a target's labels reach its per-worker step series and its
// interval series, never the step totals; a label named like one of vllmstat's own (target,
// engine, an extra label) arrives as exported_<name> and never replaces it; one whose
// exported_ name is taken as well is left out; a change of labels gives new interval series.
func TestTargetLabelsOnWorkerSeries(t *testing.T) {
	r := newReceiver(t)
	s := testSettings(r.url())
	s.Intervals = true
	w := newWriter(s, "vllm", nil)
	const a, b = "http://a:8000/metrics", "http://b:8000/metrics"
	tl := map[string]string{"team": "t1", "target": "fake", "job": "other", "engine": "e", "exported_engine": "x", "worker_labels": "w"}
	end := time.UnixMilli(1_800_000_000_000)
	rec := step.Record{Step: 1, End: end, Metrics: map[string]float64{"vllm/num_preemptions": 3},
		PerWorker: []step.WorkerRecord{
			{Target: a, Engine: "0", Metrics: map[string]float64{"vllm/num_preemptions": 1}, TargetLabels: tl},
			{Target: b, Engine: "0", Metrics: map[string]float64{"vllm/num_preemptions": 2}},
		}}
	if err := w.Write(t.Context(), &rec); err != nil {
		t.Fatal(err)
	}
	w.Interval(step.Interval{WorkerID: step.WorkerID{Target: a}, TS: end, Values: []step.IntervalValue{{Key: "num_requests_running", V: 4}}, TargetLabels: tl})
	w.Interval(step.Interval{WorkerID: step.WorkerID{Target: a}, TS: end.Add(time.Second), Values: []step.IntervalValue{{Key: "num_requests_running", V: 5}},
		TargetLabels: map[string]string{"team": "t2"}})
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, _, _ := r.stored()
	own := []promname.Label{{Name: "team", Value: "t1"}, {Name: "exported_target", Value: "fake"}, {Name: "exported_job", Value: "other"}, {Name: "exported_engine", Value: "x"}, {Name: "exported_worker_labels", Value: "w"}}
	want := map[string]float64{
		seriesKey("vllmstat_step_worker_vllm_num_preemptions", append([]promname.Label{{Name: "target", Value: a}, {Name: "engine", Value: "0"}}, own...), testExtra): 1,
		seriesKey("vllmstat_step_worker_vllm_num_preemptions", []promname.Label{{Name: "target", Value: b}, {Name: "engine", Value: "0"}}, testExtra):                 2,
		seriesKey("vllmstat_step_vllm_num_preemptions", nil, testExtra):                                                                                               3,
		seriesKey("vllmstat_interval_vllm_num_requests_running", append([]promname.Label{{Name: "target", Value: a}}, own...), testExtra):                             4,
		seriesKey("vllmstat_interval_vllm_num_requests_running", []promname.Label{{Name: "target", Value: a}, {Name: "team", Value: "t2"}}, testExtra):                5,
	}
	for k, v := range want {
		if ss := got[k]; len(ss) != 1 || ss[0][0] != v {
			t.Errorf("series %s: %v, want one sample %v", k, ss, v)
		}
	}
	for k := range got {
		if strings.Contains(k, "exported_engine=e") || strings.Contains(k, ",target=fake") || strings.Contains(k, ",job=other") || strings.Contains(k, ",worker_labels=w") {
			t.Errorf("series %s: a target label replaced one of vllmstat's or was not left out", k)
		}
	}
}
