package csvfile

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
)

// TestKeysOfRecordsAreKnown: every key of the step records the tracker wrote (its golden
// records, real runs' steps.jsonl of vLLM and SGLang fleets) is one a step record may have,
// and so is each as a phase's key: a csv sink never warns of a key vllmstat makes.
func TestKeysOfRecordsAreKnown(t *testing.T) {
	root := filepath.Join("..", "..")
	files := []string{
		filepath.Join(root, "step", "testdata", "golden_records.txt"),
		filepath.Join(root, "testkit", "testdata", "steps.jsonl"),
	}
	recs, _ := filepath.Glob(filepath.Join(root, "cli", "testdata", "recordings", "*", "steps.jsonl"))
	files = append(files, recs...)
	seen := map[string]bool{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			line := sc.Text()
			// golden_records.txt: "step {...}" and "peek {...}" are records, the rest are not
			if rest, ok := strings.CutPrefix(line, "step "); ok {
				line = rest
			} else if rest, ok := strings.CutPrefix(line, "peek "); ok {
				line = rest
			}
			var r step.Record
			if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &r) != nil {
				continue
			}
			for k := range r.Metrics {
				seen[k] = true
			}
		}
		f.Close()
	}
	if len(seen) < 100 || !seen["sglang/cached_tokens"] || !seen["vllm/num_requests_waiting_by_reason/capacity/p95"] {
		t.Fatalf("%d keys read: the records are not all there", len(seen))
	}
	// the policy keys, which no kept record has
	for _, k := range []string{"vllm/policy/version", "vllm/policy/engine_version_min", "sglang/policy/engine_version_max",
		"vllm/policy/engines_behind", "vllm/policy/publish_lag_s/mean", "vllm/policy/publish_lag_s/max",
		"vllm/policy/stale_generation_tokens", "sglang/policy/stale_token_fraction"} {
		seen[k] = true
	}
	for k := range seen {
		if !knownKey("vllm", k) {
			t.Errorf("%s: a record's key, not known", k)
		}
		if pk := step.PhaseKey("vllm", "rollout", k); !knownKey("vllm", pk) {
			t.Errorf("%s: a phase's key, not known", pk)
		}
	}
}

// TestUnknownKeys: keys no record has, and the nearest one each gets.
func TestUnknownKeys(t *testing.T) {
	for _, tt := range []struct {
		prefix, key string
		known       bool
		nearest     string
	}{
		{"vllm", "vllm/prefix_cache_hit_rate", true, ""},
		{"vllm", "sglang/cached_tokens", true, ""},
		{"vllm", "vllm/request_success/stop", true, ""},
		{"vllm", "vllm/eval/time_to_first_token_seconds/p99", true, ""},
		{"vllm", "vllm/worker_asleep_fraction/max", true, ""},
		{"vllm", "sglang/prefix_cache_hit_rate/worst_worker", true, ""},
		{"rollout/vllm", "rollout/sglang/prefix_cache_hit_rate", true, ""},
		{"fleet", "fleet/realtime_tokens/decode", true, ""},
		{"vllm", "vllm/prefix_cache_hit_rat", false, "vllm/prefix_cache_hit_rate"},
		{"vllm", "prefix_cache_hit_rate", false, "vllm/prefix_cache_hit_rate"},
		{"rollout", "kv_cache_usage_perc/mean", false, "rollout/kv_cache_usage_perc/mean"},
		{"vllm", "vllm/kv_cache_usage_perc/p50", false, "vllm/kv_cache_usage_perc/p95"},
		{"vllm", "vllm/request_sucess/stop", false, "vllm/request_success/stop"},
		{"vllm", "vllm/rollout/generation_token_per_s", false, "vllm/rollout/generation_tokens_per_s"},
		{"vllm", "sglang/num_preemption", false, "sglang/num_preemptions"},
		{"vllm", "vllm/request_success", false, ""},
		{"vllm", "vllm/no_such_key", false, ""},
		{"vllm", "vllm/prefix_cache_hit_rate/p99", false, "vllm/prefix_cache_hit_rate/p95"},
		{"vllm", "vllm/KV_cache_usage_perc/mean", false, "vllm/kv_cache_usage_perc/mean"},
	} {
		if got := knownKey(tt.prefix, tt.key); got != tt.known {
			t.Errorf("%s (prefix %s): known %v, want %v", tt.key, tt.prefix, got, tt.known)
		}
		if tt.known {
			continue
		}
		if got := nearestKey(tt.prefix, tt.key); got != tt.nearest {
			t.Errorf("%s (prefix %s): nearest %q, want %q", tt.key, tt.prefix, got, tt.nearest)
		}
	}
}
