package wandb

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/vllmstat/vllmstat/internal/report"
	"github.com/vllmstat/vllmstat/internal/step"
)

// demoRecords reads the steps of a demo run that package keyset checks its presets against.
func demoRecords(t *testing.T, file string) []*step.Record {
	t.Helper()
	out, err := report.ReadSteps(filepath.Join("..", "..", "keyset", "testdata", file))
	if err != nil || len(out) == 0 {
		t.Fatalf("%s: %d records, %v", file, len(out), err)
	}
	return out
}

// historyKeys reads the keys of each History record of a run's log (Record.history 2,
// HistoryRecord.item 1, HistoryItem.key 1), and of its Summary record (Record.summary 3,
// SummaryRecord.update 1, SummaryItem.key 1).
func historyKeys(t *testing.T, path string) (steps [][]string, summary []string) {
	t.Helper()
	keys := func(msg []byte) []string {
		var out []string
		for len(msg) > 0 {
			n, typ, k := protowire.ConsumeTag(msg)
			if k < 0 {
				t.Fatal("bad message")
			}
			msg = msg[k:]
			k = protowire.ConsumeFieldValue(n, typ, msg)
			if k < 0 {
				t.Fatal("bad message")
			}
			if n == 1 && typ == protowire.BytesType {
				item, _ := protowire.ConsumeBytes(msg)
				if key, _, ok := field(t, item, 1); ok {
					out = append(out, string(key))
				}
			}
			msg = msg[k:]
		}
		return out
	}
	for _, rec := range testLogRecords(t, path) {
		if h, _, ok := field(t, rec, 2); ok {
			steps = append(steps, keys(h))
		}
		if s, _, ok := field(t, rec, 3); ok {
			summary = keys(s)
		}
	}
	return steps, summary
}

// TestKeysSummary: with keys: summary the offline run logs at most 40 keys per step (W&B's own
// _step, _runtime and _timestamp among them) for a fleet of one engine kind, the summary
// preset's; without keys it logs every key, as it always did.
func TestKeysSummary(t *testing.T) {
	for _, file := range []string{"vllm.jsonl", "sglang.jsonl", "trtllm.jsonl"} {
		t.Run(file, func(t *testing.T) {
			rs := demoRecords(t, file)
			lean := writeInstance(t, t.TempDir(), "{type: wandb, keys: summary, images: false}", false, t0, rs)
			steps, summary := historyKeys(t, lean.Path())
			if len(steps) != len(rs) {
				t.Fatalf("%d history records, want %d", len(steps), len(rs))
			}
			for i, ks := range steps {
				t.Logf("step %d: %d keys of %d", rs[i].Step, len(ks), len(rs[i].Scalars("vllm"))+3)
				if len(ks) > 40 || len(ks) < 20 {
					t.Errorf("step %d: %d keys, want 20 to 40: %v", rs[i].Step, len(ks), ks)
				}
				for _, k := range []string{"_step", "_runtime", "_timestamp"} {
					if !slices.Contains(ks, k) {
						t.Errorf("step %d: no %s", rs[i].Step, k)
					}
				}
				for _, k := range ks {
					if _, ok := rs[i].Scalars("vllm")[k]; !ok && !strings.HasPrefix(k, "_") {
						t.Errorf("step %d: key %q is not the record's", rs[i].Step, k)
					}
				}
			}
			if !slices.Equal(summary, steps[len(steps)-1]) {
				t.Errorf("summary %v, want the last step's keys", summary)
			}

			all := writeInstance(t, t.TempDir(), "{type: wandb, images: false}", false, t0, rs)
			steps, _ = historyKeys(t, all.Path())
			for i, ks := range steps {
				want := append([]string{"_step", "_runtime", "_timestamp"}, slices.Sorted(maps.Keys(rs[i].Scalars("vllm")))...)
				if !slices.Equal(ks, want) {
					t.Errorf("step %d without keys: %d keys, want every one of the record's, %d", rs[i].Step, len(ks), len(want))
				}
			}
		})
	}
}

// TestKeysGlobs: include adds to the preset and exclude takes out, in the history and in the
// per-worker keys alike.
func TestKeysGlobs(t *testing.T) {
	rs := demoRecords(t, "vllm.jsonl")[:1]
	w := writeInstance(t, t.TempDir(), "{type: wandb, images: false, per_worker: true, keys: summary, include: ['vllm/time/*'], exclude: ['vllm/*/mfu', 'vllm/mfu', 'vllm/time/*_s']}", false, t0, rs)
	steps, _ := historyKeys(t, w.Path())
	ks := steps[0]
	for _, want := range []string{"vllm/prefix_cache_hit_rate", "vllm/time/idle_fraction", "vllm/rollout/generation_tokens_per_s"} {
		if !slices.Contains(ks, want) {
			t.Errorf("no %s", want)
		}
	}
	workers := 0
	for _, k := range ks {
		if strings.Contains(k, "mfu") || strings.HasPrefix(k, "vllm/time/") && strings.HasSuffix(k, "_s") {
			t.Errorf("excluded key %q logged", k)
		}
		if strings.HasPrefix(k, "vllm/prefix_cache_hit_rate/") {
			workers++
		}
		if strings.HasPrefix(k, "vllm/prefix_cache_hit_rate/p95") {
			t.Errorf("a key of no preset: %q", k)
		}
	}
	if workers != len(rs[0].PerWorker) {
		t.Errorf("%d workers' hit rates, want %d", workers, len(rs[0].PerWorker))
	}
}
