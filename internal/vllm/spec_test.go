package vllm

import (
	"slices"
	"strings"
	"testing"
)

// Every spelling of an engine names one family only: two families sharing a name would be read
// into both. Key names are unique too.
func TestSpellingsUnique(t *testing.T) {
	for e := range NumEngines {
		spelt := map[string]string{}
		for _, f := range allFamilies() {
			for _, n := range f.Spellings(e) {
				if o, ok := spelt[n]; ok {
					t.Errorf("%s spelling %q belongs to %s and %s", Engines[e].Name, n, o, f.Name)
				}
				spelt[n] = f.Name
			}
		}
	}
	seen := map[string]string{}
	for _, f := range allFamilies() {
		if f.SGLangOnly && len(f.SGLang) == 0 {
			t.Errorf("%s is SGLang's alone but has no SGLang spelling", f.Name)
		}
		for _, n := range append([]string{f.Name}, f.Old...) {
			if o, ok := seen[n]; ok {
				t.Errorf("spelling %q belongs to %s and %s", n, o, f.Name)
			}
			seen[n] = f.Name
		}
		if f.Title == "" || f.Group == "" || !slices.Contains(Groups, f.Group) {
			t.Errorf("%s: title %q, group %q: want a title and one of %v", f.Name, f.Title, f.Group, Groups)
		}
	}
	for _, r := range Ratios {
		if _, ok := seen[r.Name]; ok {
			t.Errorf("ratio %q has a family's name", r.Name)
		}
		if !slices.Contains(Groups, r.Group) {
			t.Errorf("ratio %s: group %q not in %v", r.Name, r.Group, Groups)
		}
	}
}

func TestPromName(t *testing.T) {
	for _, tt := range []struct {
		prefix, key, family string
		labels              []Label
	}{
		{"vllm", "vllm/kv_cache_usage_perc/p95", "vllm_kv_cache_usage_perc", []Label{{"stat", "p95"}}},
		{"vllm", "vllm/request_success/stop", "vllm_request_success", []Label{{"reason", "stop"}}},
		{"vllm", "vllm/prefix_cache_hit_rate", "vllm_prefix_cache_hit_rate", nil},
		{"vllm", "vllm/prefix_cache_hit_rate/worst_worker", "vllm_prefix_cache_hit_rate", []Label{{"stat", "worst_worker"}}},
		{"vllm", "vllm/generation_tokens_per_s", "vllm_generation_tokens_per_second", nil},
		{"a/b", "a/b/time_to_first_token_seconds/p50", "a_b_time_to_first_token_seconds", []Label{{"stat", "p50"}}},
		{"vllm", "other/x", "other_x", nil},
		{"vllm", "vllm/num_requests_waiting_by_reason/capacity/p95", "vllm_num_requests_waiting_by_reason", []Label{{"reason", "capacity"}, {"stat", "p95"}}},
		{"vllm", "vllm/spec_decode_acceptance_rate_per_pos/2", "vllm_spec_decode_acceptance_rate_per_pos", []Label{{"position", "2"}}},
		{"vllm", "vllm/request_prefill_kv_computed_tokens/p99", "vllm_request_prefill_kv_computed_tokens", []Label{{"stat", "p99"}}},
	} {
		fam, ls := PromName(tt.prefix, tt.key, nil)
		if fam != tt.family || !slices.Equal(ls, tt.labels) {
			t.Errorf("PromName(%q, %q) = %q, %v; want %q, %v", tt.prefix, tt.key, fam, ls, tt.family, tt.labels)
		}
	}
}

func TestKeyAndGroup(t *testing.T) {
	if k := Key(Prefix, Gauges[KVUsage].Name, StatP95); k != "vllm/kv_cache_usage_perc/p95" {
		t.Errorf("Key = %q", k)
	}
	for chart, want := range map[string]string{
		"prefix_cache_hit_rate":       GroupPrefixCache,
		"request_success":             GroupThroughput,
		"generation_tokens_per_s":     GroupThroughput,
		"request_queue_time_seconds":  GroupQueue,
		"time_to_first_token_seconds": GroupLatency,
		"no_such_family":              "",
	} {
		if g := Group(chart); g != want {
			t.Errorf("Group(%q) = %q, want %q", chart, g, want)
		}
	}
}

// Plots list KV usage first and every timeline series once.
func TestTimelineSeries(t *testing.T) {
	ss := TimelineSeries()
	if len(ss) == 0 || ss[0].Name != Gauges[KVUsage].Name {
		t.Fatalf("TimelineSeries starts with %v, want KV usage", ss[:min(1, len(ss))])
	}
	seen := map[string]bool{}
	for _, s := range ss {
		if seen[s.Name] {
			t.Errorf("%s listed twice", s.Name)
		}
		seen[s.Name] = true
	}
}

// The time ledger's keys name Prometheus families of their own, and the labels of the families
// read for its states alone are no labels of vllmstat's series (a target label may use them).
func TestLedgerKeyNames(t *testing.T) {
	for key, family := range map[string]string{
		"vllm/time/generating_s":                  "vllm_time_generating_seconds",
		"vllm/time/loading_weights_fraction":      "vllm_time_loading_weights_fraction",
		"sglang/time/engine_s":                    "sglang_time_engine_seconds",
		"vllm/generation_tokens_per_generating_s": "vllm_generation_tokens_per_generating_seconds",
		"sglang/prompt_tokens_per_generating_s":   "sglang_prompt_tokens_per_generating_seconds",
		"rollout/vllm/time/unreachable_s":         "rollout_vllm_time_unreachable_seconds",
	} {
		prefix := Prefix
		if p, _, ok := strings.Cut(key, "/vllm/"); ok {
			prefix = p + "/vllm"
		}
		fam, ls := PromName(prefix, key, nil)
		if fam != family || len(ls) != 0 {
			t.Errorf("PromName(%q) = %q, %v; want %q, no labels", key, fam, ls, family)
		}
		v, ok := ParseKey(prefix, key)
		if !ok || v.Key(prefix) != key || v.Stat != "" || v.Label != "" {
			t.Errorf("ParseKey(%q) = %+v, %v", key, v, ok)
		}
	}
	for _, l := range PromLabels() {
		if l == "resource" || l == "state" || l == "source" {
			t.Errorf("PromLabels has %q, a label of a family read for the ledger alone", l)
		}
	}
}

func TestResourceStates(t *testing.T) {
	rs := func(sched, weights, kv string) map[string]float64 {
		m := map[string]float64{}
		for _, s := range []string{"scheduler:running", "scheduler:paused", "weights:resident", "weights:offloaded", "weights:discarded",
			"weights:unknown", "kv_cache:resident", "kv_cache:released", "kv_cache:unknown"} {
			m[s] = 0
		}
		m["scheduler:"+sched], m["weights:"+weights], m["kv_cache:"+kv] = 1, 1, 1
		return m
	}
	for _, tt := range []struct {
		rs                     map[string]float64
		asleep, notBack, pause bool
	}{
		{nil, false, false, false},
		{rs("running", "resident", "resident"), false, false, false},
		{rs("paused", "offloaded", "released"), true, true, false}, // sleep(level=1)
		{rs("paused", "discarded", "released"), true, true, false}, // sleep(level=2)
		{rs("paused", "resident", "resident"), false, true, true},  // sleep(level=0), a pause
		{rs("paused", "resident", "released"), false, true, true},  // weights woken alone
		{rs("running", "unknown", "resident"), false, true, false}, // not known to be back
	} {
		if got := [3]bool{WeightsAsleep(tt.rs), NotAllBack(tt.rs), SchedulerPaused(tt.rs)}; got != [3]bool{tt.asleep, tt.notBack, tt.pause} {
			t.Errorf("%v: asleep, not back, paused %v; want %v", tt.rs, got, [3]bool{tt.asleep, tt.notBack, tt.pause})
		}
	}
}

// The families read for the ledger's states alone come last among the gauges, where a step
// keeps no samples (NumKeyedGauges), and have no statistics, timelines or totals.
func TestStateOnlyGaugesLast(t *testing.T) {
	for g, f := range Gauges {
		if f.StateOnly != (Gauge(g) >= NumKeyedGauges) || f.StateOnly && (f.Scalars || f.Timeline || f.Total) {
			t.Errorf("%s: state only %v, index %d of which the first %d may have keys, scalars %v, timeline %v", f.Name, f.StateOnly, g, NumKeyedGauges, f.Scalars, f.Timeline)
		}
	}
}

// A family with parts is a summed gauge without a split label: its parts add up to its total,
// and the parts' label makes no keys.
func TestPartsSummedGauges(t *testing.T) {
	n := 0
	for _, f := range Gauges {
		if f.Parts != "" {
			n++
			if f.Combine != Sum || f.Split != "" {
				t.Errorf("%s: parts by %s, combined %v, split by %q", f.Name, f.Parts, f.Combine, f.Split)
			}
		}
	}
	for _, f := range append(Counters[:], Hists[:]...) {
		if f.Parts != "" {
			t.Errorf("%s: parts of a counter or histogram", f.Name)
		}
	}
	if n == 0 || Gauges[Running].Parts != "priority" || Gauges[Waiting].Parts != "priority" {
		t.Error("SGLang's running and queue gauges have no parts by priority")
	}
}
