package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/timeline"
)

// balanceMetrics are the fleet-balance keys of step n of a made-up run of dur seconds, with a
// few of the fleet's own keys whose names are close to them.
func balanceMetrics(n int64, dur float64) map[string]float64 {
	x := float64(n)
	return map[string]float64{
		"vllm/fleet_busy_s":                       dur - 0.5,
		"vllm/straggler_tail_s":                   0.4 * x,
		"vllm/worker_idle_fraction/mean":          0.05 + 0.01*x,
		"vllm/worker_idle_fraction/max":           0.2 + 0.02*x,
		"vllm/generation_tokens_imbalance":        1 + 0.25*x,
		"vllm/prefix_cache_hit_rate/worst_worker": 0.6 - 0.01*x,
		"vllm/num_preemptions/worst_worker":       3 * x,
		"vllm/prefix_cache_hit_rate":              0.8,
		"vllm/prefix_cache_hit_rate/p95":          0.95,
		"vllm/num_preemptions":                    2 * x,
		"vllm/generation_tokens":                  5e4,
		"vllm/generation_tokens_per_s":            4000,
		"vllm/time_to_first_token_seconds/p50":    0.1,
	}
}

// balanceWorker is how a step record names worker w of testStep's timeline.
func balanceWorker(w int) string {
	return fmt.Sprintf(`"target":"http://10.0.%d.%d:8000/metrics","engine":"0"`, w/250, w%250+1)
}

// writeBalanceRun writes a run whose records carry the fleet-balance keys and fields, as the
// step package writes them, written here by hand into each steps.jsonl line:
//   - every step but each fourth has the balance keys;
//   - even steps name worker n%workers as their straggler, last busy at 90% of the step; step
//     6 names a second straggler that has no timeline row;
//   - odd steps name their worst workers instead.
//
// It returns the lines written.
func writeBalanceRun(t testing.TB, dir string, steps, workers int, timelines bool) [][]byte {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	for n := int64(1); n <= int64(steps); n++ {
		r := testStep(n, workers, 40)
		if n%4 != 0 {
			r.Metrics = balanceMetrics(n, r.DurationS)
		}
		line, err := step.MarshalLine(r)
		if err != nil {
			t.Fatal(err)
		}
		var extra string
		switch {
		case n%2 == 0:
			extra = fmt.Sprintf(`,"stragglers":[{%s,"last_busy_s":%g}`, balanceWorker(int(n)%workers), 0.9*r.DurationS)
			if n == 6 {
				extra += `,{"target":"10.9.9.9:8000","engine":"1","labels":{"ReplicaId":"r7"},"last_busy_s":17.25}`
			}
			extra += "]"
		default:
			extra = fmt.Sprintf(`,"worst_workers":{"prefix_cache_hit_rate":{%s,"value":0.25},"num_preemptions":{%s,"value":%d}}`,
				balanceWorker(1), balanceWorker(0), 3*n)
		}
		line = append(append(bytes.TrimSuffix(line, []byte("}\n")), extra...), "}\n"...)
		f.Write(line)
		lines = append(lines, line)
		if timelines {
			if _, err := timeline.Write(dir, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	return lines
}

func TestBalanceGroup(t *testing.T) {
	var keys []string
	for k := range balanceMetrics(1, 10) {
		keys = append(keys, strings.Replace(k, "vllm/", "rollout/", 1)) // any metric prefix
	}
	slices.Sort(keys)
	var balance []string
	groupOf := map[string]string{}
	for _, g := range groupKeys(keys) {
		for _, c := range g.Charts {
			var ks []string
			for _, k := range c.Keys {
				ks = append(ks, strings.TrimPrefix(keys[k], "rollout/"))
				groupOf[strings.TrimPrefix(keys[k], "rollout/")] = g.Name
			}
			if g.Name == "Fleet balance" {
				balance = append(balance, c.ID+" = "+strings.Join(ks, ","))
			}
		}
	}
	want := []string{
		"straggler_tail_s = straggler_tail_s",
		"fleet_busy_s = fleet_busy_s",
		"worker_idle_fraction = worker_idle_fraction/max,worker_idle_fraction/mean",
		"generation_tokens_imbalance = generation_tokens_imbalance",
		"prefix_cache_hit_rate/worst_worker = prefix_cache_hit_rate/worst_worker",
		"num_preemptions/worst_worker = num_preemptions/worst_worker",
	}
	if strings.Join(balance, "\n") != strings.Join(want, "\n") {
		t.Errorf("fleet balance group:\n%s\nwant:\n%s", strings.Join(balance, "\n"), strings.Join(want, "\n"))
	}
	// The fleet's own keys stay where they were.
	for k, g := range map[string]string{"prefix_cache_hit_rate": "Prefix cache", "num_preemptions": "Preemptions",
		"generation_tokens": "Throughput", "prefix_cache_hit_rate/p95": "Prefix cache"} {
		if groupOf[k] != g {
			t.Errorf("%s is in group %q, want %q", k, groupOf[k], g)
		}
	}
	// The group sits between throughput and latency.
	var names []string
	for _, g := range groupKeys(keys) {
		names = append(names, g.Name)
	}
	if i := slices.Index(names, "Fleet balance"); i < 1 || names[i-1] != "Throughput" || names[i+1] != "Latency" {
		t.Errorf("groups in order %v", names)
	}
}

func TestReportBalance(t *testing.T) {
	const steps, workers = 8, 5
	dir := t.TempDir()
	writeBalanceRun(t, dir, steps, workers, true)
	os.Remove(timeline.Path(dir, 8)) // step 8 names a straggler but has no timeline
	var b bytes.Buffer
	if err := Write(&b, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if *keep != "" {
		os.WriteFile(filepath.Join(*keep, "balance.html"), b.Bytes(), 0o644)
	}
	d := pageDataOf(t, b.Bytes())
	var raw struct {
		Values [][]*float64 `json:"values"`
	}
	page := b.String()
	start := strings.Index(page, `id="data">`) + len(`id="data">`)
	if err := json.Unmarshal([]byte(page[start:start+strings.Index(page[start:], "</script>")]), &raw); err != nil {
		t.Fatal(err)
	}

	// Every balance key is charted, with no value (null) for the steps without it.
	for _, k := range []string{"vllm/straggler_tail_s", "vllm/fleet_busy_s", "vllm/worker_idle_fraction/mean", "vllm/worker_idle_fraction/max",
		"vllm/generation_tokens_imbalance", "vllm/prefix_cache_hit_rate/worst_worker", "vllm/num_preemptions/worst_worker"} {
		i := slices.Index(d.Keys, k)
		if i < 0 {
			t.Fatalf("key %s missing from %v", k, d.Keys)
		}
		vs := raw.Values[i]
		if vs[0] == nil || *vs[0] != round(balanceMetrics(1, d.Dur[0])[k]) || vs[3] != nil || vs[7] != nil {
			t.Errorf("%s: values %v, want step 1's value first and none for steps 4 and 8", k, d.Values[i])
		}
	}
	var balance *group
	for i := range d.Groups {
		if d.Groups[i].Name == "Fleet balance" {
			balance = &d.Groups[i]
		}
	}
	if balance == nil || len(balance.Charts) != 6 {
		t.Fatalf("fleet balance group: %+v", balance)
	}

	ptr := func(v float64) *float64 { return &v }
	want := map[string]*stepBalance{
		"2": {Stragglers: []workerNote{{Label: "10.0.0.3:8000#0", Value: ptr(18), Worker: 2}}},
		"4": {Stragglers: []workerNote{{Label: "10.0.0.5:8000#0", Value: ptr(18), Worker: 4}}},
		"6": {Stragglers: []workerNote{{Label: "10.0.0.2:8000#0", Value: ptr(18), Worker: 1},
			{Label: "10.9.9.9:8000#1[ReplicaId=r7]", Value: ptr(17.25), Worker: -1}}},
		"8": {Stragglers: []workerNote{{Label: "10.0.0.4:8000#0", Value: ptr(18), Worker: -1}}},
	}
	for _, n := range []string{"1", "3", "5", "7"} {
		want[n] = &stepBalance{Worst: []workerNote{
			{What: "num_preemptions", Label: "10.0.0.1:8000#0", Value: ptr(3 * float64(n[0]-'0')), Worker: 0},
			{What: "prefix_cache_hit_rate", Label: "10.0.0.2:8000#0", Value: ptr(0.25), Worker: 1},
		}}
	}
	got, _ := json.Marshal(d.Balance)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Errorf("balance:\n%s\nwant:\n%s", got, exp)
	}
}

// TestReportWithoutBalance checks that records without the balance fields give the page no
// fleet-balance group and no balance notes, and that a malformed field is an error that says
// where.
func TestReportWithoutBalance(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir, 3, 2, 10, true)
	var b bytes.Buffer
	if err := Write(&b, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	d := pageDataOf(t, b.Bytes())
	if len(d.Balance) != 0 {
		t.Errorf("balance of a run without it: %v", d.Balance)
	}
	for _, g := range d.Groups {
		if g.Name == "Fleet balance" {
			t.Errorf("a run without balance keys has a fleet balance group: %+v", g)
		}
	}

	line := `{"step":1,"start":"2025-06-01T12:00:00Z","end":"2025-06-01T12:00:10Z","duration_s":10,"scrapes":{"ok":1,"failed":0},"workers":1,"metrics":{},"stragglers":"w1"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "steps.jsonl"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Write(&b, dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "line 1: ") || !strings.Contains(err.Error(), "stragglers") {
		t.Errorf("malformed stragglers: got %v", err)
	}
}
