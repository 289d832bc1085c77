package step

import (
	"fmt"
	"syscall"
	"testing"
)

// errRefused is a scrape whose connection was refused, as the scrape package's errors wrap it.
var errRefused = fmt.Errorf("get %q: dial tcp: %w", target, syscall.ECONNREFUSED)

// TestFirstSeenAfterEvidence: a worker first seen after evidence that it was not there counts
// whole, with or without _created; without evidence its first page is a baseline.
func TestFirstSeenAfterEvidence(t *testing.T) {
	type obs struct {
		ts     float64
		err    error // nil: the page
		added  bool  // Added before it
		forget bool  // Forget before it
		pages  []eng
	}
	tests := []struct {
		name string
		obs  []obs
		want float64 // generation_tokens of the one step, ending after the last
	}{
		{"a worker its target's earlier pages did not show", []obs{
			{ts: 0, pages: []eng{{engine: "0", gen: 100}}},
			{ts: 1, pages: []eng{{engine: "0", gen: 110}, {engine: "1", gen: 4000}}},
		}, 10 + 4000},
		{"the first page of a target there from the start: a baseline", []obs{
			{ts: 0, pages: []eng{{engine: "0", gen: 100}, {engine: "1", gen: 4000}}},
		}, 0},
		{"a target that refused every connection since the run started", []obs{
			{ts: 0, err: errRefused}, {ts: 1, err: errRefused},
			{ts: 2, pages: []eng{{engine: "0", gen: 680}}},
		}, 680},
		{"refused, then a timeout: its server may have been up", []obs{
			{ts: 0, err: errRefused}, {ts: 1, err: errTest},
			{ts: 2, pages: []eng{{engine: "0", gen: 680}}},
		}, 0},
		{"a target added while the run ran that refused: a baseline", []obs{
			{ts: 0, added: true, err: errRefused}, {ts: 1, err: errRefused},
			{ts: 2, pages: []eng{{engine: "0", gen: 680}}},
		}, 0},
		{"a worker forgotten with its target, back: a baseline", []obs{
			{ts: 0, pages: []eng{{engine: "0", gen: 100}}},
			{ts: 1, forget: true, added: true, pages: []eng{{engine: "0", gen: 150}}},
		}, 0},
		{"a worker new on a target back after Forget: its earlier pages did not show it", []obs{
			{ts: 0, pages: []eng{{engine: "0", gen: 100}}},
			{ts: 1, forget: true, added: true, pages: []eng{{engine: "0", gen: 150}, {engine: "1", gen: 30}}},
		}, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(Options{})
			tr.Begin(at(-1))
			for _, o := range tt.obs {
				if o.forget {
					tr.Forget(target)
				}
				if o.added {
					tr.Added(target)
				}
				if o.err != nil {
					tr.Observe(at(o.ts), target, nil, o.err)
				} else {
					tr.Observe(at(o.ts), target, mustPage(t, o.pages...), nil)
				}
			}
			r := tr.EndStep(1, at(10))
			if got := r.Metrics["vllm/generation_tokens"]; got != tt.want {
				t.Errorf("generation_tokens = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDepartedWorkerBackIsNoNewWorker: a worker forgotten as it departed, back later, is a
// worker the run saw: its return is no evidence that it was not there, and its first page back
// is a baseline (unless _created dates it after its target's last answer).
func TestDepartedWorkerBackIsNoNewWorker(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true})
	obs := func(s float64, es ...eng) { tr.Observe(at(s), target, mustPage(t, es...), nil) }
	obs(0, eng{engine: "0", gen: 100}, eng{engine: "1", gen: 10})
	tr.EndStep(1, at(0))
	obs(1, eng{engine: "0", gen: 110})
	obs(2, eng{engine: "0", gen: 120})
	if r := tr.EndStep(2, at(2)); len(r.Forgotten) != 1 {
		t.Fatalf("step 2 forgot %v, want engine 1", r.Forgotten)
	}
	obs(3, eng{engine: "0", gen: 130}, eng{engine: "1", gen: 70}, eng{engine: "2", gen: 5})
	r := tr.EndStep(3, at(3))
	want(t, r.Metrics, "vllm/generation_tokens", 10+0+5)
}
