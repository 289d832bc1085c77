package step

import (
	"bytes"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
)

// TestTargetLabels follows a target's labels through per_worker records and intervals: set,
// changed, kept for the step in which the target is forgotten, gone after it, and absent from
// the JSON line of a worker without labels.
func TestTargetLabels(t *testing.T) {
	pageOf := func(v string) *page.Page {
		p, err := page.ParsePage([]byte("vllm:generation_tokens_total{engine=\"0\"} " + v + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var ivs []Interval
	tr := NewTracker(Options{PerWorker: true, OnInterval: func(iv Interval) { ivs = append(ivs, iv.Clone()) }})
	const other = "http://g:8000/metrics"
	tr.Observe(at(0), other, pageOf("1"), nil)
	tr.Observe(at(0), target, pageOf("1"), nil)
	tr.SetTargetLabels(target, map[string]string{"team": "a"})
	tr.Observe(at(1), target, pageOf("2"), nil)
	r1 := tr.EndStep(1, at(2))
	if got := labelsOf(t, r1); got["team"] != "a" || len(got) != 1 {
		t.Fatalf("step 1 labels %v, want team=a", got)
	}
	if ivs[len(ivs)-1].TargetLabels["team"] != "a" {
		t.Fatalf("interval labels %v, want team=a", ivs[len(ivs)-1].TargetLabels)
	}
	line, err := MarshalLine(&r1)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(line, []byte(`"target_labels"`)) != 1 || !bytes.Contains(line, []byte(`"target_labels":{"team":"a"}`)) {
		t.Fatalf("step 1 line %s: want target_labels on the labelled worker only", line)
	}

	in := map[string]string{"team": "b"}
	tr.SetTargetLabels(target, in)
	in["team"] = "changed by the caller" // the tracker keeps its own copy
	tr.Observe(at(3), target, pageOf("3"), nil)
	tr.Forget(target)
	r2 := tr.EndStep(2, at(4))
	if got := labelsOf(t, r2)["team"]; got != "b" {
		t.Fatalf("step 2, in which the target was forgotten: label %q, want b", got)
	}
	tr.Observe(at(5), target, pageOf("4"), nil) // back without labels: a new worker
	r3 := tr.EndStep(3, at(6))
	if got := labelsOf(t, r3); got != nil {
		t.Fatalf("step 3, after the forgotten target's step: labels %v, want none", got)
	}

	tr.SetTargetLabels(target, map[string]string{"team": "c"})
	tr.Forget(target)
	tr.SetTargetLabels(target, map[string]string{"team": "d"}) // back before the step ended
	tr.Observe(at(7), target, pageOf("5"), nil)
	r4 := tr.EndStep(4, at(8))
	tr.EndStep(5, at(9))
	if labelsOf(t, r4)["team"] != "d" {
		t.Fatalf("step 4: labels %v, want team=d", labelsOf(t, r4))
	}
	tr.Observe(at(10), target, pageOf("6"), nil)
	if r := tr.Peek(at(11)); labelsOf(t, r)["team"] != "d" {
		t.Fatalf("after step 5: labels %v, want team=d kept", labelsOf(t, r))
	}
	tr.SetTargetLabels(target, nil)
	if r := tr.Peek(at(12)); labelsOf(t, r) != nil {
		t.Fatalf("labels cleared: %v", labelsOf(t, r))
	}
}

// labelsOf returns the labels of target's worker in r.
func labelsOf(t *testing.T, r Record) map[string]string {
	t.Helper()
	for _, w := range r.PerWorker {
		if w.Target == target {
			return w.TargetLabels
		}
	}
	t.Fatalf("step %d has no worker of %s", r.Step, target)
	return nil
}
