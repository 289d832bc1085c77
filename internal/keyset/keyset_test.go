package keyset

import (
	"encoding/json"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config/yamlx"
	"github.com/vllmstat/vllmstat/internal/report"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The records in testdata are the steps.jsonl of demo runs of each engine kind, with every
// option that adds keys (SGLang's and TensorRT-LLM's without per_worker, to keep them small):
//
//	vllmstat demo --steps 3 --speed 20 --colocated --eval-every 2 --spec-decode 3 --gpu H100 --kv-connector --straggler 2
//	vllmstat demo --engine sglang --steps 3 --speed 20 --colocated --eval-every 2 --spec-decode 3 --gpu H100
//	vllmstat demo --engine trtllm --steps 3 --speed 20 --colocated --gpu H100
var recordFiles = []string{"vllm.jsonl", "sglang.jsonl", "trtllm.jsonl"}

// Records reads the records of a testdata file.
func Records(t testing.TB, file string) []*step.Record {
	t.Helper()
	out, err := report.ReadSteps(filepath.Join("testdata", file))
	if err != nil || len(out) == 0 {
		t.Fatalf("%s: %d records, %v", file, len(out), err)
	}
	return out
}

// realKeys are every key of the testdata records, phases' as trackers spell them.
func realKeys(t *testing.T) map[string]bool {
	keys := map[string]bool{}
	for _, f := range recordFiles {
		for _, r := range Records(t, f) {
			for k := range r.Scalars(vllm.Prefix) {
				keys[k] = true
			}
		}
	}
	return keys
}

// TestPresetsMatchRealKeys: every glob of each preset matches a key that real records have,
// so that a preset names no key that does not exist (a typo, a key renamed).
func TestPresetsMatchRealKeys(t *testing.T) {
	keys := realKeys(t)
	for _, p := range []struct {
		name  Preset
		globs []string
	}{{Summary, summary}, {Standard, standard}} {
		for _, g := range p.globs {
			if err := CheckGlob(g); err != nil {
				t.Errorf("%s: %q: %v", p.name, g, err)
				continue
			}
			found := false
			for k := range keys {
				if _, rest, ok := strings.Cut(k, "/"); ok {
					if m, _ := path.Match(g, rest); m {
						found = true
						break
					}
				}
			}
			if !found {
				t.Errorf("preset %s: %q matches no key of the records in testdata", p.name, g)
			}
		}
	}
}

// TestSummaryIsSmall: the summary preset keeps at most 40 keys of a one-kind fleet's step,
// fewer than standard, which keeps fewer than all.
func TestSummaryIsSmall(t *testing.T) {
	sum := Settings{Keys: Summary}.Compile(vllm.Prefix)
	std := Settings{Keys: Standard}.Compile(vllm.Prefix)
	for _, f := range recordFiles {
		for _, r := range Records(t, f) {
			all := r.Scalars(vllm.Prefix)
			ns := len(sum.Record(r, vllm.Prefix).Scalars(vllm.Prefix))
			nd := len(std.Record(r, vllm.Prefix).Scalars(vllm.Prefix))
			t.Logf("%s step %d: summary %d, standard %d, all %d", f, r.Step, ns, nd, len(all))
			if ns == 0 || ns > 40 || ns >= nd || nd >= len(all) {
				t.Errorf("%s step %d: summary %d keys, standard %d, all %d; want 0 < summary <= 40 < standard < all", f, r.Step, ns, nd, len(all))
			}
		}
	}
}

func TestKeep(t *testing.T) {
	for _, tt := range []struct {
		name   string
		set    Settings
		prefix string
		keep   []string
		drop   []string
	}{
		{name: "all", set: Settings{}, keep: []string{"vllm/time/idle_s", "sglang/x"}},
		{name: "summary", set: Settings{Keys: Summary},
			keep: []string{"vllm/prefix_cache_hit_rate", "sglang/prefix_cache_hit_rate", "trtllm/mfu", "vllm/rollout/generation_tokens_per_s"},
			drop: []string{"vllm/prefix_cache_hit_rate/p95", "vllm/eval/generation_tokens_per_s", "vllm/time/idle_s", "other/prefix_cache_hit_rate"}},
		{name: "summary under a prefix of one's own", set: Settings{Keys: Summary}, prefix: "rl",
			keep: []string{"rl/prefix_cache_hit_rate"}, drop: []string{"vllm/prefix_cache_hit_rate"}},
		{name: "summary under a prefix ending in vllm", set: Settings{Keys: Summary}, prefix: "team/vllm",
			keep: []string{"team/vllm/mfu", "team/sglang/mfu"}, drop: []string{"vllm/mfu"}},
		{name: "preset plus include minus exclude",
			set:  Settings{Keys: Summary, Include: []string{"vllm/time/*"}, Exclude: []string{"*/*/mfu", "vllm/time/idle_s"}},
			keep: []string{"vllm/time/waking_s", "vllm/prefix_cache_hit_rate", "vllm/mfu"},
			drop: []string{"vllm/time/idle_s", "vllm/rollout/mfu", "vllm/rollout/time/idle_s"}},
		{name: "include alone", set: Settings{Include: []string{"vllm/time/*"}},
			keep: []string{"vllm/time/idle_s"}, drop: []string{"vllm/prefix_cache_hit_rate"}},
		{name: "exclude alone", set: Settings{Exclude: []string{"vllm/request_*/*"}},
			keep: []string{"vllm/prefix_cache_hit_rate"}, drop: []string{"vllm/request_prompt_tokens/p50"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prefix := cmpOr(tt.prefix, vllm.Prefix)
			s := tt.set.Compile(prefix)
			for _, k := range tt.keep {
				if !s.Keep(k) {
					t.Errorf("drops %q", k)
				}
			}
			for _, k := range tt.drop {
				if s.Keep(k) {
					t.Errorf("keeps %q", k)
				}
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestRecord: a record through a set keeps the step's own fields and the kept keys of its
// metrics, phases and workers, with their values, and leaves the record it was given alone.
func TestRecord(t *testing.T) {
	recs := Records(t, "vllm.jsonl")
	r := recs[len(recs)-1]
	before, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	set := Settings{Keys: Summary, Include: []string{"vllm/*/time/idle_s"}}.Compile(vllm.Prefix)
	got := set.Record(r, vllm.Prefix)
	after, _ := json.Marshal(r)
	if string(before) != string(after) {
		t.Fatal("Record changed the record it was given")
	}
	if got.Step != r.Step || !got.End.Equal(r.End) || got.Workers != r.Workers || got.DurationS != r.DurationS || got.Scrapes != r.Scrapes {
		t.Errorf("step fields changed: %+v", got)
	}
	want := map[string]float64{}
	for k, v := range r.Scalars(vllm.Prefix) {
		if set.Keep(k) {
			want[k] = v
		}
	}
	if gs := got.Scalars(vllm.Prefix); !maps.Equal(gs, want) {
		t.Errorf("scalars %v, want %v", slices.Sorted(maps.Keys(gs)), slices.Sorted(maps.Keys(want)))
	}
	if len(r.Phases) == 0 || got.Phases["rollout"].Metrics["vllm/time/idle_s"] != r.Phases["rollout"].Metrics["vllm/time/idle_s"] {
		t.Errorf("the included phase key is missing: %v", got.Phases["rollout"])
	}
	if len(r.PerWorker) == 0 || len(got.PerWorker) != len(r.PerWorker) {
		t.Fatalf("workers %d, want %d", len(got.PerWorker), len(r.PerWorker))
	}
	for i, w := range got.PerWorker {
		if w.Target != r.PerWorker[i].Target || len(w.Metrics) == 0 || len(w.Metrics) >= len(r.PerWorker[i].Metrics) {
			t.Errorf("worker %d: %d keys of %d", i, len(w.Metrics), len(r.PerWorker[i].Metrics))
		}
		for k := range w.Metrics {
			if !set.Keep(k) {
				t.Errorf("worker %d keeps %q", i, k)
			}
		}
	}
	if (Settings{}).Compile(vllm.Prefix).Record(r, vllm.Prefix) != r {
		t.Error("the set of every key copied the record")
	}
}

// TestRecordValues: the typed values of a tracker's record are kept as their keys are.
func TestRecordValues(t *testing.T) {
	vs := []vllm.Value{{Name: "prefix_cache_hit_rate", V: 0.5}, {Name: "kv_cache_usage_perc", Stat: "p95", V: 0.9},
		{Kind: vllm.SGLang, Name: "prefix_cache_hit_rate", V: 0.25}}
	r := &step.Record{Step: 3, Values: vs, Metrics: vllm.Flat(vllm.Prefix, vs)}
	got := Settings{Keys: Summary}.Compile(vllm.Prefix).Record(r, vllm.Prefix)
	if len(got.Values) != 2 || got.Values[0].V != 0.5 || got.Values[1].V != 0.25 {
		t.Errorf("values %v", got.Values)
	}
	if !maps.Equal(got.Metrics, map[string]float64{"vllm/prefix_cache_hit_rate": 0.5, "sglang/prefix_cache_hit_rate": 0.25}) {
		t.Errorf("metrics %v", got.Metrics)
	}
	none := Settings{Include: []string{"nothing"}}.Compile(vllm.Prefix).Record(r, vllm.Prefix)
	if none.Values == nil || len(none.Values) != 0 || len(none.Metrics) != 0 {
		t.Errorf("a set keeping nothing gave values %v (nil %v), metrics %v", none.Values, none.Values == nil, none.Metrics)
	}
}

// TestSettingsProblems: a bad preset or glob is refused with its key and line.
func TestSettingsProblems(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want []string
	}{
		{"keys: sumary\n", []string{`keys (line 1): "sumary" is not allowed: must be one of summary, standard, all`}},
		{"keys: [a]\n", []string{"keys (line 1): a list is not allowed: must be one of summary, standard, all"}},
		{"keys: summary\ninclude: ['vllm/[time/*']\n", []string{`include[0] (line 2): "vllm/[time/*" is not allowed: not a glob`}},
		{"exclude: [ok, '']\n", []string{`exclude[1] (line 1): "" is not allowed: must be a glob of key names`}},
		{"exclude: ['a\\']\n", []string{`exclude[0]`, "not a glob"}},
		{"keys: all\ninclude: [vllm/time/*]\n", []string{"include (line 2): adds keys to a preset"}},
	} {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(tt.yaml), &n); err != nil {
			t.Fatal(err)
		}
		var s Settings
		at, es := yamlx.Decode(n.Content[0], &s, yamlx.Options{})
		es = append(es, s.Validate(at)...)
		got := strings.Join(es.Strings(""), "\n")
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: problems\n%s\nwant %q", tt.yaml, got, w)
			}
		}
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("keys: standard\ninclude: ['vllm/*/time/*']\nexclude: ['vllm/policy/*']\n"), &n); err != nil {
		t.Fatal(err)
	}
	var s Settings
	at, es := yamlx.Decode(n.Content[0], &s, yamlx.Options{})
	if es = append(es, s.Validate(at)...); len(es) > 0 || s.Keys != Standard || len(s.Include) != 1 || len(s.Exclude) != 1 {
		t.Errorf("good settings: %v, %+v", es, s)
	}
}
