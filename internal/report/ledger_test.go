package report

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
)

// ledgerSeconds are the fleet's engine-seconds by state (in ledgerStates' order) of steps 2-5
// of a test run; step 1 is a record from before the ledger. 80 engine-seconds a step: 181 of
// 320 generating (56.6%), then idle 74 (23.1%), asleep 25 (7.8%), loading weights 20 (6.25%).
var ledgerSeconds = map[int64][7]float64{
	2: {40, 20, 10, 2, 3, 5, 0},
	3: {50, 15, 5, 1, 4, 5, 0},
	4: {60, 10, 0, 0, 5, 5, 0},
	5: {31, 29, 10, 2, 3, 5, 0},
}

// The phases' engine-seconds by state: the rollout's (112 of 128 generating: 87.5%), the
// eval's.
var (
	rolloutSeconds = [7]float64{28, 4}
	evalSeconds    = [7]float64{6, 2}
)

// putLedger adds the ledger's keys of seconds under prefix to m: each state's, their sum and
// each state's fraction of it.
func putLedger(m map[string]float64, prefix string, seconds [7]float64) {
	sum := 0.0
	for _, v := range seconds {
		sum += v
	}
	for i, st := range ledgerStates[:len(seconds)] { // a vLLM pool's: no undetermined
		m[prefix+"/time/"+st+"_s"] = seconds[i]
		m[prefix+"/time/"+st+"_fraction"] = seconds[i] / sum
	}
	m[prefix+"/time/engine_s"] = sum
}

// addLedger gives record r of testStep (with addTestPhases' phases) the ledger's keys of
// ledgerSeconds and the phases', and the policy's keys: the trainer at version n, the engines
// at n-1 to n, stale tokens 50·n² of 1000·n generation tokens (19.3% over steps 2-5, 25% in
// step 5). Step 1 gets generation tokens only.
func addLedger(r *step.Record) {
	n := float64(r.Step)
	r.Metrics["vllm/generation_tokens"] = 1000 * n
	secs, ok := ledgerSeconds[r.Step]
	if !ok {
		return
	}
	putLedger(r.Metrics, "vllm", secs)
	if p := r.Phases[rolloutPhase]; p != nil {
		putLedger(p.Metrics, "vllm", rolloutSeconds)
	}
	if p := r.Phases["eval"]; p != nil {
		putLedger(p.Metrics, "vllm", evalSeconds)
	}
	for k, v := range map[string]float64{
		"version": n, "engine_version_min": n - 1, "engine_version_max": n, "engines_behind": 1,
		"publish_lag_s/mean": 1.5, "publish_lag_s/max": 3,
		"stale_generation_tokens": 50 * n * n, "stale_token_fraction": 50 * n * n / (1000 * n),
	} {
		r.Metrics["vllm/policy/"+k] = v
	}
}

// ledgerRun is steps 1..steps of testStep with addTestPhases' phases and addLedger's keys.
func ledgerRun(steps, workers int) []*step.Record {
	var recs []*step.Record
	for n := range int64(steps) {
		r := testStep(n+1, workers, 40)
		addTestPhases(r)
		addLedger(r)
		recs = append(recs, r)
	}
	return recs
}

func buildOf(t *testing.T, recs []*step.Record) *pageData {
	t.Helper()
	d, err := build("t", recs, nil, newDirSource(t.TempDir()), Options{}.withDefaults(), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// chartWith finds the chart of id and its group, nil when the page has none.
func chartWith(d *pageData, id string) (*chart, string) {
	for _, g := range d.Groups {
		for i := range g.Charts {
			if g.Charts[i].ID == id {
				return &g.Charts[i], g.Name
			}
		}
	}
	return nil, ""
}

// linesOf names the keys of c as the page does: their phase, then their line.
func linesOf(d *pageData, c *chart) []string {
	var out []string
	for _, k := range c.Keys {
		name := c.Names[d.KeyOf[k]]
		if p := d.KeyPhase[k]; p != "" {
			name = p + " " + name
		}
		out = append(out, name)
	}
	return out
}

func TestLedgerChart(t *testing.T) {
	recs := ledgerRun(5, 3)
	d := buildOf(t, recs)

	// The stacked chart leads the fleet balance: the whole step's states in their fixed order
	// with the total last, then the rollout's, then the eval's.
	c, group := chartWith(d, "time/<state>_s")
	if c == nil {
		t.Fatalf("no ledger chart in %+v", d.Groups)
	}
	var first string
	for _, g := range d.Groups {
		if g.Name == group {
			first = g.Charts[0].ID
		}
	}
	if group != "Fleet balance" || first != c.ID || c.Kind != "stack" || c.Title != "Where the step went" || c.Unit != "engine-seconds by state" {
		t.Errorf("ledger chart %q (%s, %q) in %q, which starts with %q; want the first chart of the fleet balance", c.Title, c.Kind, c.Unit, group, first)
	}
	var want []string
	for _, phase := range []string{"", "rollout ", "eval "} {
		for _, st := range append(slices.Clone(ledgerStates[:len(ledgerStates)-1]), "total") {
			want = append(want, phase+st)
		}
	}
	if got := linesOf(d, c); !slices.Equal(got, want) {
		t.Errorf("ledger chart's lines %q\nwant %q", got, want)
	}
	// Each key's values are the records', null in the steps without them.
	for _, k := range c.Keys {
		for j, r := range recs {
			want, ok := r.Metrics[d.KeyOf[k]]
			if p := d.KeyPhase[k]; p != "" {
				ok = r.Phases[p] != nil
				if ok {
					want, ok = r.Phases[p].Metrics[d.KeyOf[k]]
				}
			}
			if got := d.Values[k][j]; ok != !math.IsNaN(got) || ok && got != want {
				t.Errorf("%s in step %d: %v, want %v (present %v)", d.Keys[k], r.Step, got, want, ok)
			}
		}
	}
	// unreachable_s is 0 in every step, and stays stacked; its fraction goes to the
	// always-zero line.
	if c, _ := chartWith(d, "time/<state>_fraction"); c == nil || c.Kind != "states" || !c.Frac ||
		!slices.Equal(linesOf(d, c)[:6], ledgerStates[:6]) || slices.Contains(linesOf(d, c), "unreachable") {
		t.Errorf("fraction chart %+v", c)
	}
	zero := false
	for _, z := range d.Zero {
		for _, k := range z.Keys {
			zero = zero || d.Keys[k] == "vllm/time/unreachable_fraction"
			if z.Kind == "stack" {
				t.Errorf("the stacked chart's %s is named always zero", d.Keys[k])
			}
		}
	}
	if !zero {
		t.Error("unreachable_fraction, 0 in every step, is not named always zero")
	}
	// No ledger key is left to a chart of its own.
	for _, g := range d.Groups {
		for _, c := range g.Charts {
			if strings.Contains(c.ID, "time/") && c.Kind == "" {
				t.Errorf("ledger key charted alone: %s in %s", c.ID, g.Name)
			}
		}
	}

	// Without time/engine_s in any step: no ledger chart, no generating share.
	plain := buildOf(t, func() []*step.Record {
		var recs []*step.Record
		for n := range int64(4) {
			r := testStep(n+1, 3, 40)
			addTestPhases(r)
			recs = append(recs, r)
		}
		return recs
	}())
	for _, g := range plain.Groups {
		for _, c := range g.Charts {
			if c.Kind != "" {
				t.Errorf("a run without the ledger has chart %s (%s)", c.ID, c.Kind)
			}
		}
	}
	for _, x := range plain.Headline {
		if x.ID == "generating-share" || x.ID == "stale-tokens" {
			t.Errorf("a run without the ledger and policy has tile %s", x.ID)
		}
	}
}

func TestLedgerTiles(t *testing.T) {
	d := buildOf(t, ledgerRun(5, 3))
	tiles := map[string]tile{}
	var ids []string
	for _, x := range d.Headline {
		tiles[x.ID] = x
		ids = append(ids, x.ID)
	}
	if i := slices.Index(ids, "generating-share"); i < 0 || i+1 >= len(ids) || ids[i-1] != "throughput" || ids[i+1] != "stale-tokens" {
		t.Errorf("tiles %v, want the generating and stale-token shares after the throughput", ids)
	}
	gen := tiles["generating-share"]
	// 181 of 320 engine-seconds; the rest mostly idle (74) and asleep (25); the rollout 112 of 128.
	if got := strings.ReplaceAll(gen.Value+" | "+gen.Sub, nbsp, " "); got != "56.6% | generating / all engine-seconds (320 engine-s) · idle 23.1% · asleep 7.8% · in the rollout 87.5%" {
		t.Errorf("generating share: %q", got)
	}
	if len(gen.Spark) != 1 || !gen.Frac || fmt.Sprint(gen.Spark[0]) != fmt.Sprint(values{math.NaN(), 40.0 / 80, 50.0 / 80, 60.0 / 80, 31.0 / 80}) {
		t.Errorf("generating share's steps: %v", gen.Spark)
	}
	// 50·n² stale of 1000·n tokens in steps 2-5: 2,700 of 14,000; step 1's 1,000 tokens have no
	// policy keys and do not count.
	st := tiles["stale-tokens"]
	if got := st.Value + " | " + st.Sub; got != "19.3% | stale tokens / all generation tokens (14,000 tokens) · last step 25.0%" {
		t.Errorf("stale-token share: %q", got)
	}
	if len(st.Spark) != 1 || fmt.Sprint(st.Spark[0]) != fmt.Sprint(values{math.NaN(), 0.1, 0.15, 0.2, 0.25}) {
		t.Errorf("stale-token share's steps: %v", st.Spark)
	}

	// Without generation tokens, the last step's stale token fraction.
	recs := ledgerRun(5, 3)
	for _, r := range recs {
		delete(r.Metrics, "vllm/generation_tokens")
		delete(r.Metrics, "vllm/generation_tokens_per_s")
	}
	for _, x := range buildOf(t, recs).Headline {
		if x.ID == "stale-tokens" && x.Value+" | "+x.Sub != "25.0% | last step" {
			t.Errorf("stale-token share without generation tokens: %q | %q", x.Value, x.Sub)
		}
	}
}

// TestLedgerKinds: a fleet of vLLM and SGLang workers gets each kind's charts, vLLM's first,
// and a generating share of all engine-seconds.
func TestLedgerKinds(t *testing.T) {
	recs := ledgerRun(5, 3)
	for _, r := range recs {
		if _, ok := ledgerSeconds[r.Step]; ok {
			putLedger(r.Metrics, "sglang", [7]float64{15, 15})
		}
	}
	d := buildOf(t, recs)
	var balance []string
	for _, g := range d.Groups {
		if g.Name == "Fleet balance" {
			for _, c := range g.Charts {
				balance = append(balance, c.ID+": "+c.Title)
			}
		}
	}
	want := []string{
		"time/<state>_s: Where the step went · vLLM",
		"time/<state>_fraction: Engine time by state · vLLM",
		"sglang/time/<state>_s: Where the step went · SGLang",
		"sglang/time/<state>_fraction: Engine time by state · SGLang",
	}
	if len(balance) < 4 || !slices.Equal(balance[:4], want) {
		t.Errorf("fleet balance charts %q\nwant them to start %q", balance, want)
	}
	c, _ := chartWith(d, "sglang/time/<state>_s")
	for _, k := range c.Keys {
		if !strings.HasPrefix(d.KeyOf[k], "sglang/") {
			t.Errorf("SGLang's ledger chart holds %s", d.Keys[k])
		}
	}
	for _, x := range d.Headline {
		// 181 + 4·15 of 320 + 4·30 engine-seconds.
		if x.ID == "generating-share" && strings.ReplaceAll(x.Value+" | "+x.Sub, nbsp, " ") != "54.8% | generating / all engine-seconds (440 engine-s, vLLM and SGLang) · idle 30.5% · asleep 5.7% · in the rollout 87.5%" {
			t.Errorf("generating share of two kinds: %q | %q", x.Value, x.Sub)
		}
	}
}

func TestPolicyCharts(t *testing.T) {
	d := buildOf(t, ledgerRun(5, 3))
	var groups []string
	var charts []string
	for _, g := range d.Groups {
		groups = append(groups, g.Name)
		if g.Name != "Policy" {
			continue
		}
		for _, c := range g.Charts {
			charts = append(charts, fmt.Sprintf("%s (%s; %s) = %s", c.ID, c.Title, c.Unit, strings.Join(linesOf(d, &c), ",")))
		}
	}
	if i := slices.Index(groups, "Policy"); i < 1 || groups[i-1] != "Throughput" {
		t.Errorf("groups %v, want the policy after the throughput", groups)
	}
	want := []string{
		"policy/version (Policy version; version) = engines' min,engines' max,trainer",
		"policy/publish_lag_s (Policy publish lag; seconds) = mean,max",
		"policy/engines_behind (Engines behind the trainer; engines) = step",
		"policy/stale_token_fraction (Stale token fraction; stale / all generation tokens (0–1)) = step",
		"policy/stale_generation_tokens (Stale generation tokens; tokens per step) = step",
	}
	if strings.Join(charts, "\n") != strings.Join(want, "\n") {
		t.Errorf("policy charts:\n%s\nwant:\n%s", strings.Join(charts, "\n"), strings.Join(want, "\n"))
	}
	// A run without policy keys has no such group.
	for _, g := range buildOf(t, []*step.Record{testStep(1, 2, 10)}).Groups {
		if g.Name == "Policy" {
			t.Error("a run without policy keys has a policy group")
		}
	}
}

// TestGeneratingShareUndetermined: SGLang's undetermined time, which its page could not tell
// generating from idle, is said on the generating share's tile right after the share, not
// among the other states; without it the tile says nothing of it.
func TestGeneratingShareUndetermined(t *testing.T) {
	sub := func(undetermined float64) string {
		recs := ledgerRun(5, 3)
		for _, r := range recs {
			if _, ok := ledgerSeconds[r.Step]; ok {
				// generating 15, idle 5, undetermined as given, of the SGLang engines
				putLedger(r.Metrics, "sglang", [7]float64{15, 5})
				r.Metrics["sglang/time/undetermined_s"] = undetermined
				r.Metrics["sglang/time/engine_s"] += undetermined
			}
		}
		for _, x := range buildOf(t, recs).Headline {
			if x.ID == "generating-share" {
				return strings.ReplaceAll(x.Value+" | "+x.Sub, nbsp, " ")
			}
		}
		t.Fatal("no generating share")
		return ""
	}
	// 181 + 4·15 of 320 + 4·(20+10) engine-seconds; 40 of them undetermined.
	if got, want := sub(10), "54.8% | generating / all engine-seconds (440 engine-s, vLLM and SGLang) · undetermined 9.1% (SGLang's gauges not refreshed: generating or idle) · idle 21.4% · asleep 5.7% · in the rollout 87.5%"; got != want {
		t.Errorf("tile %q\nwant %q", got, want)
	}
	if got := sub(0); strings.Contains(got, "undetermined") {
		t.Errorf("tile %q tells of undetermined time without any", got)
	}
}

// TestGeneratingShareUndeterminedTRTLLM: the generating share's tile names the engine kinds
// whose gauges were not refreshed, TensorRT-LLM's where they had the undetermined time.
func TestGeneratingShareUndeterminedTRTLLM(t *testing.T) {
	recs := ledgerRun(5, 3)
	for _, r := range recs {
		if _, ok := ledgerSeconds[r.Step]; ok {
			putLedger(r.Metrics, "trtllm", [7]float64{15, 5})
			r.Metrics["trtllm/time/undetermined_s"] = 10
			r.Metrics["trtllm/time/engine_s"] += 10
		}
	}
	for _, x := range buildOf(t, recs).Headline {
		if x.ID != "generating-share" {
			continue
		}
		if sub := strings.ReplaceAll(x.Sub, nbsp, " "); !strings.Contains(sub, "vLLM and TensorRT-LLM) · undetermined 9.1% (TensorRT-LLM's gauges not refreshed: generating or idle)") {
			t.Errorf("tile %q", sub)
		}
		return
	}
	t.Fatal("no generating share")
}
