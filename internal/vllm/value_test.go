package vllm

import (
	"slices"
	"testing"
)

// Every value the spec can give a record spells a key that takes apart into the same value,
// under one-part and many-part prefixes, so that records read back from JSON group and name
// like the tracker's own; under a prefix that keeps engines apart, with the value's engine.
func TestValueKeyRoundTrip(t *testing.T) {
	var vs []Value
	statsOf := append([]string{"", WorstWorker}, IntervalStats...)
	for _, q := range HistQuantiles {
		if !slices.Contains(statsOf, q.Stat) {
			statsOf = append(statsOf, q.Stat)
		}
	}
	names := []string{"fleet_busy_s", "worker_idle_fraction", "generation_tokens_imbalance"}
	for _, f := range allFamilies() {
		names = append(names, f.Name)
	}
	for _, r := range Ratios {
		names = append(names, r.Name)
	}
	for _, r := range Rates {
		names = append(names, r.Name())
	}
	slices.Sort(names)
	names = slices.Compact(names) // two engines' ratios may share a name
	for _, n := range names {
		labels := []string{""}
		if _, split := splitLabels[n]; split {
			labels = []string{"stop", "capacity", "2"}
		}
		for _, l := range labels {
			for _, s := range statsOf {
				vs = append(vs, Value{Name: n, Label: l, Stat: s, V: 1.5})
			}
		}
	}
	for _, tt := range []struct {
		prefix  string
		engines []Engine
	}{{"vllm", []Engine{VLLM, SGLang}}, {"rl/vllm", []Engine{VLLM, SGLang}}, {"rl/gen-1", []Engine{VLLM}}} {
		prefix := tt.prefix
		var all []Value
		for _, e := range tt.engines {
			for _, v := range vs {
				v.Kind = e
				all = append(all, v)
			}
		}
		vs := all
		for _, v := range vs {
			key := v.Key(prefix)
			got, ok := ParseKey(prefix, key)
			got.V = v.V
			if !ok || got != v {
				t.Errorf("ParseKey(%q, %q) = %+v, %v; want %+v", prefix, key, got, ok, v)
			}
			fam, ls := PromName(prefix, key, nil)
			wfam, wls := v.PromName(prefix, nil)
			if fam != wfam || !slices.Equal(ls, wls) {
				t.Errorf("PromName(%q, %q) = %q %v; the value's is %q %v", prefix, key, fam, ls, wfam, wls)
			}
		}
		if m := Flat(prefix, vs); len(m) != len(vs) {
			t.Errorf("prefix %q: %d values flatten to %d keys; two share a key", prefix, len(vs), len(m))
		}
	}
}

func TestValueKey(t *testing.T) {
	for _, tt := range []struct {
		v    Value
		want string
	}{
		{Value{Name: "prefix_cache_hit_rate"}, "vllm/prefix_cache_hit_rate"},
		{Value{Name: "kv_cache_usage_perc", Stat: StatP95}, "vllm/kv_cache_usage_perc/p95"},
		{Value{Name: "request_success", Label: "stop"}, "vllm/request_success/stop"},
		{Value{Name: "num_requests_waiting_by_reason", Label: "capacity", Stat: StatMax}, "vllm/num_requests_waiting_by_reason/capacity/max"},
	} {
		if got := tt.v.Key("vllm"); got != tt.want {
			t.Errorf("%+v.Key = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestEnginePrefix(t *testing.T) {
	for _, tt := range []struct {
		prefix string
		e      Engine
		want   string
	}{
		{"vllm", VLLM, "vllm"},
		{"vllm", SGLang, "sglang"},
		{"rollout/vllm", SGLang, "rollout/sglang"},
		{"rollout/vllm", VLLM, "rollout/vllm"},
		{"rollout", SGLang, "rollout"},
		{"myvllm", SGLang, "myvllm"},
	} {
		if got := EnginePrefix(tt.prefix, tt.e); got != tt.want {
			t.Errorf("EnginePrefix(%q, %v) = %q, want %q", tt.prefix, tt.e, got, tt.want)
		}
	}
	v := Value{Name: "kv_cache_usage_perc", Stat: StatP95, Kind: SGLang}
	if k := v.Key("vllm"); k != "sglang/kv_cache_usage_perc/p95" {
		t.Errorf("SGLang key %q", k)
	}
	if fam, ls := PromName("vllm", "sglang/realtime_tokens/decode", nil); fam != "sglang_realtime_tokens" || !slices.Equal(ls, []Label{{"mode", "decode"}}) {
		t.Errorf("PromName of an SGLang key = %q %v", fam, ls)
	}
}
