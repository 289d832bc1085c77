package timeline

import (
	"bytes"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
)

// TestWorkerLabelsInFiles: workers that differ only by their worker labels (two Ray replicas
// with engine "0" on one target) stay apart in a timeline file, sorted by their labels, and
// come back from it; a worker without labels has no labels key.
func TestWorkerLabelsInFiles(t *testing.T) {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	const tg = "http://10.0.0.5:8080/metrics"
	r := &step.Record{Step: 3, Start: start, End: start.Add(2 * time.Second), Timeline: &step.Timeline{Start: start, Workers: []step.WorkerTimeline{
		{WorkerID: step.WorkerID{Target: tg, Engine: "0", Labels: `ReplicaId="r2",WorkerId="w2"`}, Series: map[string][]step.Point{"num_requests_running": {{OffsetS: 1, Value: 5}}}},
		{WorkerID: step.WorkerID{Target: tg, Engine: "0", Labels: `ReplicaId="r1",WorkerId="w1"`}, Series: map[string][]step.Point{"num_requests_running": {{OffsetS: 1, Value: 3}}}},
		{WorkerID: step.WorkerID{Target: "http://h:8000/metrics", Engine: "0"}, Series: map[string][]step.Point{"num_requests_running": {{OffsetS: 1, Value: 1}}}},
	}}}
	data, err := Marshal(FromRecord(r))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\n{\"target\":\"http://10.0.0.5:8080/metrics\",\"engine\":\"0\",\"labels\":{\"ReplicaId\":\"r1\",\"WorkerId\":\"w1\"},\"series\":{\n\"num_requests_running\":[{\"t\":1,\"v\":3}]}},",
		"\n{\"target\":\"http://10.0.0.5:8080/metrics\",\"engine\":\"0\",\"labels\":{\"ReplicaId\":\"r2\",\"WorkerId\":\"w2\"},\"series\":{",
		"\n{\"target\":\"http://h:8000/metrics\",\"engine\":\"0\",\"series\":{",
	} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("file lacks %q:\n%s", want, data)
		}
	}
	f, err := Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Workers) != 3 || !maps.Equal(f.Workers[1].Labels, map[string]string{"ReplicaId": "r2", "WorkerId": "w2"}) || f.Workers[2].Labels != nil {
		t.Fatalf("workers read back %+v", f.Workers)
	}
	if id := f.Workers[0].ID(); id != r.Timeline.Workers[1].WorkerID {
		t.Errorf("ID() = %+v, want %+v", id, r.Timeline.Workers[1].WorkerID)
	}
	if again, _ := Marshal(f); !bytes.Equal(again, data) {
		t.Errorf("re-encoding changed the file:\n%s\n%s", data, again)
	}
}

func TestLabelsOfRayReplicas(t *testing.T) {
	ids := []step.WorkerID{
		{Target: "http://10.0.0.5:8080/metrics", Engine: "0", Labels: `ReplicaId="k7qz2m1d",WorkerId="5f1c0a9e"`},
		{Target: "http://10.0.0.5:8080/metrics", Engine: "0", Labels: `ReplicaId="p3xw9c4e",WorkerId="a2e4c6b8"`},
	}
	if got := Label(ids[0]); got != "10.0.0.5:8080#0[ReplicaId=k7qz2m1d,WorkerId=5f1c0a9e]" {
		t.Errorf("Label = %q", got)
	}
	if got := Label(step.WorkerID{Target: "http://h:8000/metrics", Labels: `WorkerId="w"`}); got != "h:8000[WorkerId=w]" {
		t.Errorf("Label without engine = %q", got)
	}
	// Narrow: the shared start goes, up to the label's value.
	got := Labels(ids, 30)
	if strings.Join(got, "|") != "…k7qz2m1d,WorkerId=5f1c0a9e]|…p3xw9c4e,WorkerId=a2e4c6b8]" {
		t.Errorf("Labels = %q", got)
	}
}
