package page

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The SGLang fixtures are pages of SGLang's families (names, types, labels and buckets as
// python/sglang/srt/observability/metrics_collector.py declares them), rendered by Python's
// prometheus_client in multiprocess mode, as SGLang serves them, with one process per SGLang
// process: a tokenizer, whose series carry no rank, and a scheduler per exporting rank.
//   - tp2-pp2-dp2: DP 2 × PP 2 × TP 2 with --enable-metrics-for-all-schedulers: every rank
//     exports a copy of its DP rank's figures.
//   - dp-attention: DP attention (DP 2, TP 2) without it: only tp_rank 0 exports, dp_rank 0.
//   - openmetrics: one server without DP, in the OpenMetrics rendering (Accept header).
//   - sgl-router-engine-metrics: two such servers merged by sgl-router's /engine_metrics: the
//     text's ':' replaced by '_', worker_addr added to every sample, in a layout of its own (the
//     router's as it writes it today is sgl-model-gateway-engine-metrics, sglang_current_test.go).

// sglangWorker is what a test expects of one worker of an SGLang page.
type sglangWorker struct {
	labels      string
	running     float64 // -1: the worker has no gauges
	waiting     float64
	kv          float64
	retractions float64 // num_preemptions, -1 for none
	realtime    float64 // realtime_tokens{mode="decode"}, -1 for none
	prompt      float64 // -1 for none
	cached      float64
	hists       int
}

func TestSGLangFixturePages(t *testing.T) {
	tests := []struct {
		file    string
		workers []sglangWorker
	}{
		{"prometheus-client-render-sglang-tp2-pp2-dp2.prom", []sglangWorker{
			// The tokenizer's series: the server's tokens, requests and latencies.
			{labels: "", running: -1, retractions: -1, realtime: -1, prompt: 192 * 611, cached: 192 * 419, hists: 3},
			// Each DP rank counted once, from one of its eight copies.
			{labels: `dp_rank="0"`, running: 12, waiting: 3, kv: 0.1131, retractions: 5, realtime: 113952, prompt: -1, hists: 1},
			{labels: `dp_rank="1"`, running: 24, waiting: 6, kv: 0.2262, retractions: 10, realtime: 2 * 113952, prompt: -1, hists: 1},
		}},
		{"prometheus-client-render-sglang-dp-attention.prom", []sglangWorker{
			{labels: "", running: -1, retractions: -1, realtime: -1, prompt: 192 * 611, cached: 192 * 419, hists: 3},
			{labels: `dp_rank="0"`, running: 12, waiting: 3, kv: 0.1131, retractions: 5, realtime: 113952, prompt: -1, hists: 1},
		}},
		{"prometheus-client-render-sglang-openmetrics.prom", []sglangWorker{
			// Without DP, the scheduler's and the tokenizer's series are one worker.
			{labels: "", running: 12, waiting: 3, kv: 0.1131, retractions: 5, realtime: 113952, prompt: 96 * 611, cached: 96 * 419, hists: 4},
		}},
		{"sgl-router-engine-metrics.prom", []sglangWorker{
			{labels: `worker_addr="http://10.0.0.1:30000"`, running: 12, waiting: 3, kv: 0.1131, retractions: 5, realtime: 113952, prompt: 96 * 611, cached: 96 * 419, hists: 4},
			{labels: `worker_addr="http://10.0.0.2:30000"`, running: 13, waiting: 3, kv: 0.1231, retractions: 5, realtime: 113952, prompt: 192 * 611, cached: 192 * 419, hists: 4},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body := readPage(t, tt.file)
			p, err := ParsePage(body)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Engines) != len(tt.workers) {
				t.Fatalf("%d workers, want %d: %+v", len(p.Engines), len(tt.workers), p.Engines)
			}
			for i, w := range tt.workers {
				ep := p.Engines[i]
				if ep.Kind != vllm.SGLang || ep.Engine != "" || ep.Labels != w.labels {
					t.Errorf("worker %d is %v %q %q, want SGLang %q", i, ep.Kind, ep.Engine, ep.Labels, w.labels)
					continue
				}
				checkSGLangWorker(t, ep, w)
			}
			// A Parser reads the page as ParsePage does, and so the same page again by its lines.
			ps := NewParser(Options{})
			for range 2 {
				pg, err := ps.Parse(body)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(stripOwner(pg), p) {
					t.Errorf("Parser's page differs from ParsePage's (replayed %v)", ps.Replayed())
				}
			}
			if !ps.Replayed() {
				t.Error("the same page again was not read by its lines")
			}
			// A page whose lines are mostly the last one's (series come and go, ranks among
			// them) is read as ParsePage reads it too.
			var lines []string
			for i, l := range strings.SplitAfter(string(body), "\n") {
				if i%7 != 3 || strings.HasPrefix(l, "#") {
					lines = append(lines, l)
				}
			}
			next := []byte(strings.Join(lines, ""))
			want, err := ParsePage(next)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ps.Parse(next)
			if err != nil || !reflect.DeepEqual(stripOwner(got), want) {
				t.Errorf("Parser on a page with fewer lines: %v; differs from ParsePage's", err)
			}
		})
	}
}

func stripOwner(p *Page) *Page {
	q := *p
	q.owner = nil
	return &q
}

func checkSGLangWorker(t *testing.T, ep EnginePage, w sglangWorker) {
	t.Helper()
	if w.running < 0 {
		for g, has := range ep.HasGauge {
			if has {
				t.Errorf("%q: gauge %s, want none", w.labels, vllm.Gauges[g].Name)
			}
		}
	} else {
		if ep.Gauges[vllm.Running] != w.running || ep.Gauges[vllm.KVUsage] != w.kv || ep.Gauges[vllm.Waiting] != w.waiting {
			t.Errorf("%q: running %v kv %v waiting %v, want %v %v %v", w.labels, ep.Gauges[vllm.Running], ep.Gauges[vllm.KVUsage], ep.Gauges[vllm.Waiting], w.running, w.kv, w.waiting)
		}
		if !ep.HasGauge[vllm.GenThroughput] || !ep.HasGauge[vllm.PausedReqs] || !ep.HasGauge[vllm.SpecAcceptLength] || !ep.HasGauge[vllm.UsedTokens] {
			t.Errorf("%q: SGLang's own gauges missing: %v", w.labels, ep.HasGauge)
		}
	}
	want := map[vllm.Counter]float64{vllm.Preemptions: w.retractions, vllm.PromptTokens: w.prompt, vllm.CachedTokens: w.cached}
	if w.prompt < 0 {
		want[vllm.CachedTokens] = -1
	}
	for c, v := range want {
		sum, _, n := counter(ep, c)
		if v < 0 && n > 0 || v >= 0 && sum != v {
			t.Errorf("%q: %s = %v over %d series, want %v", w.labels, vllm.Counters[c].Name, sum, n, v)
		}
	}
	decode := -1.0
	for _, cs := range ep.Counters {
		if cs.Family == vllm.RealtimeTokens && cs.Reason == "decode" {
			decode = cs.Value
		}
		for _, rank := range []string{"tp_rank", "pp_rank", "dp_rank", "worker_addr"} {
			if strings.Contains(cs.Key, rank+"=") {
				t.Errorf("%q: series key %q holds %s", w.labels, cs.Key, rank)
			}
		}
	}
	if decode != w.realtime {
		t.Errorf("%q: realtime_tokens{mode=decode} = %v, want %v", w.labels, decode, w.realtime)
	}
	if len(ep.Hists) != w.hists {
		t.Errorf("%q: %d histograms, want %d", w.labels, len(ep.Hists), w.hists)
	}
}

// The copies of a worker's figures that its ranks export count once: the lowest pp_rank, then
// the lowest tp_rank, whichever order the page lists them in, and the worker keeps its series
// when that rank goes and another takes its place.
func TestSGLangAuthoritativeRank(t *testing.T) {
	line := func(tp, pp string, v string) string {
		return `sglang:num_running_reqs{dp_rank="0",model_name="m",pp_rank="` + pp + `",tp_rank="` + tp + `"} ` + v + "\n" +
			`sglang:num_retracted_requests_total{dp_rank="0",model_name="m",pp_rank="` + pp + `",tp_rank="` + tp + `"} ` + v + "\n"
	}
	for _, tt := range []struct {
		name string
		page string
		want float64
	}{
		{"tp0 pp0 last", line("1", "1", "4") + line("1", "0", "3") + line("0", "1", "2") + line("0", "0", "1"), 1},
		{"pp before tp", line("0", "1", "2") + line("3", "0", "7"), 7},
		{"no pp_rank", `sglang:num_running_reqs{dp_rank="0",tp_rank="1"} 5` + "\n" + `sglang:num_running_reqs{dp_rank="0",tp_rank="0"} 6` + "\n", 6},
		{"rank not a number", `sglang:num_running_reqs{tp_rank="x"} 5` + "\n" + `sglang:num_running_reqs{tp_rank="2"} 6` + "\n", 6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePage([]byte(tt.page))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Engines) != 1 || p.Engines[0].Gauges[vllm.Running] != tt.want {
				t.Fatalf("workers %+v, want one running %v", p.Engines, tt.want)
			}
			ep := p.Engines[0]
			if sum, _, n := counter(ep, vllm.Preemptions); strings.Contains(tt.page, "retracted") && (n != 1 || sum != tt.want) {
				t.Errorf("retractions %v over %d series, want %v once", sum, n, tt.want)
			}
			// The fast paths give the same page.
			ps := NewParser(Options{})
			for range 2 {
				pg, err := ps.Parse([]byte(tt.page))
				if err != nil || !reflect.DeepEqual(stripOwner(pg), p) {
					t.Fatalf("Parser: %v, %+v; want %+v", err, pg, p)
				}
			}
		})
	}
}

// A page of vLLM and SGLang workers (a merged page) reads both, each with its own families; an
// SGLang name never feeds a vLLM worker and the other way round.
func TestMixedEnginePage(t *testing.T) {
	page := `vllm:num_requests_running{engine="0",model_name="m"} 3
vllm:prompt_tokens_total{engine="0",model_name="m"} 100
sglang:num_running_reqs{model_name="m",tp_rank="0"} 5
sglang:prompt_tokens_total{model_name="m"} 200
`
	p, err := ParsePage([]byte(page))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Engines) != 2 {
		t.Fatalf("%d workers, want 2: %+v", len(p.Engines), p.Engines)
	}
	s, v := p.Engines[0], p.Engines[1]
	if s.Kind != vllm.SGLang || s.Gauges[vllm.Running] != 5 || v.Kind != vllm.VLLM || v.Engine != "0" || v.Gauges[vllm.Running] != 3 {
		t.Errorf("workers %+v", p.Engines)
	}
	if a, _, _ := counter(s, vllm.PromptTokens); a != 200 {
		t.Errorf("SGLang prompt tokens %v", a)
	}
	if a, _, _ := counter(v, vllm.PromptTokens); a != 100 {
		t.Errorf("vLLM prompt tokens %v", a)
	}
}

// SGLang's names are not among the names a scraper asks a vLLM server for.
func TestSampleNamesVLLMOnly(t *testing.T) {
	for _, n := range SampleNames() {
		if strings.HasPrefix(n, "sglang") {
			t.Fatalf("SampleNames has %q", n)
		}
	}
}

func TestHint(t *testing.T) {
	parse := func(body string) *Page {
		t.Helper()
		p, err := ParsePage([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	file := func(name string) *Page {
		t.Helper()
		return parse(string(readPage(t, name)))
	}
	for _, tt := range []struct {
		name               string
		page               *Page
		notFound, declared bool
		want               string
	}{
		{"404", nil, true, false, HintNotFound},
		{"failed scrape", nil, false, false, ""},
		{"no family", parse("# HELP python_info x\n# TYPE python_info gauge\npython_info 1\n"), false, false, HintNoFamily},
		{"empty page", parse(""), false, false, HintNoFamily},
		{"families without series", parse("# HELP vllm:num_preemptions_total x\n# TYPE vllm:num_preemptions_total counter\n"), false, true, ""},
		{"vLLM", file("prometheus-client-render-vllm-0.20.prom"), false, false, ""},
		{"DP attention, rank 0 only", file("prometheus-client-render-sglang-dp-attention.prom"), false, false, HintDPRankZero},
		{"every DP rank", file("prometheus-client-render-sglang-tp2-pp2-dp2.prom"), false, false, ""},
		{"no DP", file("prometheus-client-render-sglang-openmetrics.prom"), false, false, ""},
		{"router", file("sgl-router-engine-metrics.prom"), false, false, ""},
	} {
		if got := Hint(tt.page, tt.notFound, tt.declared); got != tt.want {
			t.Errorf("%s: Hint = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestDeclares: HELP and TYPE lines name a family vllmstat reads in any of its spellings (a
// counter with or without _total, a histogram by its family name), on pages whose samples are
// gone; other families, samples and other comments do not.
func TestDeclares(t *testing.T) {
	comments := func(name string) string {
		var b strings.Builder
		for _, l := range strings.SplitAfter(string(readPage(t, name)), "\n") {
			if strings.HasPrefix(l, "#") {
				b.WriteString(l)
			}
		}
		return b.String()
	}
	for _, tt := range []struct {
		name, page string
		want       bool
	}{
		{"vLLM's comments", comments("prometheus-client-render-vllm-0.20.prom"), true},
		{"SGLang's comments", comments("prometheus-client-render-sglang-openmetrics.prom"), true},
		{"a counter's TYPE in the text format", "# TYPE vllm:num_preemptions_total counter\n", true},
		{"a counter's TYPE in OpenMetrics", "# TYPE vllm:num_preemptions counter\n", true},
		{"a histogram's HELP", "  # HELP sglang:time_to_first_token_seconds x\n", true},
		{"Ray's spelling", "# HELP ray_vllm_num_requests_running x\n", true},
		{"another family", "# HELP python_info x\n# TYPE python_info gauge\npython_info 1\n", false},
		{"a sample, no comment", "vllm:num_requests_running 1\n", false},
		{"a comment naming one", "# vllm:num_requests_running is off\n", false},
		{"empty", "", false},
	} {
		if got := Declares([]byte(tt.page)); got != tt.want {
			t.Errorf("%s: Declares = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// With priority scheduling, SGLang exports its running and queue gauges per priority and as a
// total under priority="": a worker reads its total alone, or the sum of its priorities without
// one, never both; the priorities' values are kept by priority. A Parser reads the next pages,
// values changed, as ParsePage does.
func TestSGLangPriorities(t *testing.T) {
	render := func(total bool, k float64) string {
		var b strings.Builder
		for _, g := range []struct {
			name  string
			parts [3]float64 // total, priority 0, priority 1
		}{{"num_running_reqs", [3]float64{7, 3, 4}}, {"num_queue_reqs", [3]float64{4, 1, 3}}} {
			for i, p := range []string{"", "0", "1"} {
				if i > 0 || total {
					fmt.Fprintf(&b, "sglang:%s{model_name=\"m\",priority=%q,tp_rank=\"0\"} %v\n", g.name, p, k*g.parts[i])
				}
			}
		}
		return b.String()
	}
	for _, total := range []bool{true, false} {
		ps := NewParser(Options{})
		for i := range 3 {
			k := float64(i)
			body := []byte(render(total, k+1))
			p, err := ParsePage(body)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Engines) != 1 {
				t.Fatalf("total %v: %d workers", total, len(p.Engines))
			}
			ep := p.Engines[0]
			running, waiting := ep.Gauges[vllm.Running], ep.Gauges[vllm.Waiting]
			if running != 7*(k+1) || waiting != 4*(k+1) || !ep.HasGauge[vllm.Running] || !ep.HasGauge[vllm.Waiting] {
				t.Errorf("total %v, page %v: running %v, waiting %v; want %v and %v", total, k, running, waiting, 7*(k+1), 4*(k+1))
			}
			want := map[string]float64{"0": 3 * (k + 1), "1": 4 * (k + 1)}
			if got := ep.SplitGauges[vllm.Running]; !reflect.DeepEqual(got, want) {
				t.Errorf("total %v, page %v: running by priority %v, want %v", total, k, got, want)
			}
			pg, err := ps.Parse(body)
			if err != nil || !reflect.DeepEqual(stripOwner(pg), p) {
				t.Errorf("total %v, page %v: Parser's page %+v (%v), ParsePage's %+v", total, k, pg, err, p)
			}
			if k > 0 && !ps.Replayed() {
				t.Errorf("total %v, page %v: not read by the previous page's lines", total, k)
			}
		}
	}
}

// Two copies whose ranks are one number (tp_rank="0" and "00") are two copies, not one worker's
// series twice: the page reads the one of the smaller labels, the other is among its copies.
func TestSGLangTiedCopies(t *testing.T) {
	const tiedPage = `sglang:prompt_tokens_total{model_name="m"} 100
sglang:num_running_reqs{model_name="m",pp_rank="0",tp_rank="00"} 5
sglang:num_retracted_requests_total{model_name="m",pp_rank="0",tp_rank="00"} 9
sglang:num_running_reqs{model_name="m",pp_rank="0",tp_rank="0"} 5
sglang:num_retracted_requests_total{model_name="m",pp_rank="0",tp_rank="0"} 7
`
	p, err := ParsePage([]byte(tiedPage))
	if err != nil || len(p.Engines) != 1 {
		t.Fatalf("%v, %+v", err, p)
	}
	ep := p.Engines[0]
	if ep.Copy != `pp_rank="0",tp_rank="0"` || len(ep.Copies) != 1 || ep.Copies[0].Copy != `pp_rank="0",tp_rank="00"` {
		t.Fatalf("copy %q, copies %+v", ep.Copy, ep.Copies)
	}
	for _, c := range []struct {
		ep   *EnginePage
		want float64
	}{{&ep, 7}, {&ep.Copies[0], 9}} {
		var retracted, prompt float64
		for _, cs := range c.ep.Counters {
			switch cs.Family {
			case vllm.Preemptions:
				retracted += cs.Value
				if !cs.Ranked {
					t.Errorf("%s: retractions not of the copy", c.ep.Copy)
				}
			case vllm.PromptTokens:
				prompt += cs.Value
				if cs.Ranked {
					t.Errorf("%s: the tokenizer's prompt tokens of the copy", c.ep.Copy)
				}
			}
		}
		if retracted != c.want || prompt != 100 || c.ep.Gauges[vllm.Running] != 5 {
			t.Errorf("%s: retractions %v, prompt tokens %v, running %v; want %v, 100 and 5", c.ep.Copy, retracted, prompt, c.ep.Gauges[vllm.Running], c.want)
		}
	}
	ps := NewParser(Options{})
	for range 2 {
		pg, err := ps.Parse([]byte(tiedPage))
		if err != nil || !reflect.DeepEqual(stripOwner(pg), p) {
			t.Fatalf("Parser: %v, %+v; want %+v", err, pg, p)
		}
	}
}
