package remotewrite

import (
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/keyset"
	"github.com/vllmstat/vllmstat/internal/step"
)

// TestWriteKeySet: with keys, include and exclude the writer sends the chosen keys' series of
// the whole step, its phases and its workers, and the step's own series (number, duration,
// workers, scrapes, phase intervals) always.
func TestWriteKeySet(t *testing.T) {
	recs := phaseRecords(t)
	r := newReceiver(t)
	set := testSettings(r.url())
	set.Settings = keyset.Settings{Keys: keyset.Summary, Include: []string{"vllm/*/kv_cache_usage_perc/p95"}, Exclude: []string{"vllm/eval/*"}}
	w := newWriter(set, "vllm", nil)
	writeAll(t, w, recs)
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, samples, _ := r.stored()

	// What the records hold of the chosen keys, spelled by the same walk as every key.
	ks := set.Settings.Compile("vllm")
	lean := make([]step.Record, len(recs))
	for i := range recs {
		lean[i] = *ks.Record(&recs[i], "vllm")
	}
	want, n := expected(lean, nil, testExtra)
	compare(t, got, want)
	all, nAll := expected(recs, nil, testExtra)
	if samples != n || n >= nAll/3 {
		t.Errorf("stored %d samples, want %d (of %d for every key)", samples, n, nAll)
	}
	has := func(sub ...string) int {
		c := 0
		for k := range got {
			ok := true
			for _, s := range sub {
				ok = ok && strings.Contains(k, s)
			}
			if ok {
				c++
			}
		}
		return c
	}
	for _, tt := range []struct {
		what string
		sub  []string
		want bool
	}{
		{"step number", []string{"__name__=vllmstat_step_number,"}, true},
		{"eval phase's intervals", []string{"__name__=vllmstat_step_phase_intervals,", "phase=eval"}, true},
		{"the hit rate", []string{"__name__=vllmstat_step_vllm_prefix_cache_hit_rate,"}, true},
		{"a worker's hit rate", []string{"__name__=vllmstat_step_worker_vllm_prefix_cache_hit_rate,", "target="}, true},
		{"the rollout's included p95", []string{"__name__=vllmstat_step_vllm_kv_cache_usage_perc,", "phase=rollout", "stat=p95"}, true},
		{"the step's p95 KV usage", []string{"__name__=vllmstat_step_vllm_kv_cache_usage_perc,", "stat=p95", "run="}, false},
		{"an excluded eval key", []string{"__name__=vllmstat_step_vllm_prefix_cache_hit_rate,", "phase=eval"}, false},
		{"a key of no preset", []string{"__name__=vllmstat_step_vllm_time_idle_seconds,"}, false},
	} {
		c := has(tt.sub...)
		if tt.what == "the step's p95 KV usage" {
			c -= has(append(tt.sub, "phase=")...)
		}
		if (c > 0) != tt.want {
			t.Errorf("%s: %d series, want any: %v", tt.what, c, tt.want)
		}
	}
	if len(all) <= len(got) {
		t.Errorf("%d series, no fewer than the %d of every key", len(got), len(all))
	}
}
