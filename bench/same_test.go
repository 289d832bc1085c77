package bench

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/benchpage"
	"github.com/vllmstat/vllmstat/internal/expo"
	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// testPages are the benchmark pages and a variant of each, as the fleet server serves them.
func testPages(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range PageNames() {
		body, err := Page(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = body
		out[name+"-variant"] = benchpage.Variant(body, 1)
	}
	return out
}

// TestParsersReadTheSameSamples makes the benchmarks compare like with like: on every page, the
// parsers of VictoriaMetrics, Prometheus and expfmt read the same sample lines with the same
// values, vllmstat's lexer hands over exactly those of them whose names vllmstat reads, and the
// page vllmstat keeps holds their values for a few named series.
func TestParsersReadTheSameSamples(t *testing.T) {
	for name, body := range testPages(t) {
		t.Run(name, func(t *testing.T) {
			vm, err := vmSamples(body)
			if err != nil {
				t.Fatalf("VictoriaMetrics: %v", err)
			}
			prom, err := promSamples(body)
			if err != nil {
				t.Fatalf("Prometheus: %v", err)
			}
			ef, err := expfmtSamples(body)
			if err != nil {
				t.Fatalf("expfmt: %v", err)
			}
			lines := sampleLines(body)
			if len(prom) != lines {
				t.Errorf("Prometheus read %d samples, the page has %d sample lines", len(prom), lines)
			}
			sameSamples(t, "expfmt", ef, prom, 0)
			// VictoriaMetrics reads some decimals one unit in the last place off (its float
			// parser trades exact rounding for speed): same series, values within 2 ulp.
			if n := sameSamples(t, "VictoriaMetrics", vm, prom, 2); n > 0 {
				t.Logf("VictoriaMetrics: %d of %d values not exactly the decimal on the page", n, len(prom))
			}

			wanted := map[string]bool{}
			for _, n := range page.SampleNames() {
				wanted[n] = true
			}
			var kept []sample
			for _, s := range prom {
				if wanted[s.name] {
					kept = append(kept, s)
				}
			}
			if len(kept) == 0 {
				t.Fatal("no sample of a family vllmstat reads on the page")
			}
			var got []sample
			err = expo.Parse(body, expo.NewNames(page.SampleNames()), func(s *expo.Sample) {
				ls := make([]pair, 0, len(s.Labels))
				for _, l := range s.Labels {
					ls = append(ls, pair{l.Name, l.Value})
				}
				smp, err := newSample(s.Name, ls, s.Value)
				if err != nil {
					t.Error(err)
				}
				got = append(got, smp)
			})
			if err != nil {
				t.Fatalf("vllmstat: %v", err)
			}
			sameSamples(t, "vllmstat", got, kept, 0)

			p, err := page.ParsePage(body)
			if err != nil {
				t.Fatalf("vllmstat: %v", err)
			}
			checkNamed(t, p, prom)
		})
	}
}

// TestWarmParserReadsTheSameValues checks vllmstat's warm parser on successive variants of each
// page, as the benchmark runs it: each page it returns holds the samples' values.
func TestWarmParserReadsTheSameValues(t *testing.T) {
	for _, name := range PageNames() {
		body, err := Page(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			p := page.NewParser(page.Options{})
			for k := range 4 {
				v := benchpage.Variant(body, k+1)
				prom, err := promSamples(v)
				if err != nil {
					t.Fatal(err)
				}
				pg, err := p.Parse(v)
				if err != nil {
					t.Fatalf("variant %d: %v", k+1, err)
				}
				checkNamed(t, pg, prom)
				pg.Release()
			}
		})
	}
}

// sampleLines counts the lines that are neither comments nor blank.
func sampleLines(page []byte) int {
	n := 0
	for l := range strings.Lines(string(page)) {
		if l = strings.TrimSpace(l); l != "" && l[0] != '#' {
			n++
		}
	}
	return n
}

// sameSamples checks that got and want hold the same series, in any order, with values at most
// ulps units in the last place apart; it returns how many values are not equal.
func sameSamples(t *testing.T, who string, got, want []sample, ulps uint64) (inexact int) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s read %d samples, want %d", who, len(got), len(want))
	}
	values := func(ss []sample) map[string]float64 {
		m := make(map[string]float64, len(ss))
		for _, s := range ss {
			if _, dup := m[s.key()]; dup {
				t.Errorf("%s: series %s twice", who, s.key())
			}
			m[s.key()] = s.value
		}
		return m
	}
	g, w := values(got), values(want)
	bad := 0
	for k, v := range w {
		gv, ok := g[k]
		if ok && (gv == v || math.IsNaN(gv) && math.IsNaN(v)) {
			continue
		}
		if ok && ulpDist(gv, v) <= ulps {
			inexact++
			continue
		}
		if bad++; bad <= 5 {
			t.Errorf("%s: %s = %v (read: %v), want %v", who, k, gv, ok, v)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			if bad++; bad <= 5 {
				t.Errorf("%s: %s not on the page", who, k)
			}
		}
	}
	return inexact
}

// ulpDist is the number of float64 values from a to b, for finite values of one sign.
func ulpDist(a, b float64) uint64 {
	if math.Signbit(a) != math.Signbit(b) || math.IsInf(a, 0) || math.IsInf(b, 0) || math.IsNaN(a) || math.IsNaN(b) {
		return math.MaxUint64
	}
	x, y := math.Float64bits(a), math.Float64bits(b)
	if x > y {
		return x - y
	}
	return y - x
}

// checkNamed compares what vllmstat keeps per worker for running requests, prompt tokens and
// time to first token with the samples of those series.
func checkNamed(t *testing.T, p *page.Page, all []sample) {
	t.Helper()
	prefix := ""
	for _, ns := range vllm.Namespaces {
		if slices.ContainsFunc(all, func(s sample) bool { return s.name == ns+"num_requests_running" }) {
			prefix = ns
			break
		}
	}
	if prefix == "" || len(p.Engines) == 0 {
		t.Fatalf("no vLLM workers on the page (%d kept)", len(p.Engines))
	}
	for _, ep := range p.Engines {
		// the samples of this worker named name, their number and sum
		of := func(name string) (int, float64) {
			n, sum := 0, 0.0
			for _, s := range all {
				if s.name == prefix+name && worker(s) == ep.Engine+"|"+ep.Labels {
					n++
					sum += s.value
				}
			}
			return n, sum
		}
		who := ep.Engine + " " + ep.Labels
		if n, v := of("num_requests_running"); n == 0 || !ep.HasGauge[vllm.Running] || ep.Gauges[vllm.Running] != v {
			t.Errorf("worker %s: running %v, the page's %d series add up to %v", who, ep.Gauges[vllm.Running], n, v)
		}
		var prompt float64
		for _, c := range ep.Counters {
			if c.Family == vllm.PromptTokens {
				prompt += c.Value
			}
		}
		if n, v := of("prompt_tokens_total"); n == 0 || prompt != v {
			t.Errorf("worker %s: prompt tokens %v, the page's %d series add up to %v", who, prompt, n, v)
		}
		var count float64
		buckets := 0
		for _, h := range ep.Hists {
			if h.Family == vllm.TTFT {
				count += h.Count
				buckets += len(h.Buckets)
			}
		}
		n, v := of("time_to_first_token_seconds_count")
		if n == 0 || count != v {
			t.Errorf("worker %s: time to first token count %v, the page's %d series add up to %v", who, count, n, v)
		}
		if nb, _ := of("time_to_first_token_seconds_bucket"); nb != buckets {
			t.Errorf("worker %s: %d time to first token buckets kept, the page has %d", who, buckets, nb)
		}
	}
}

// worker names the worker a sample belongs to as engine|worker labels, the way page.Page
// tells them apart with its default worker labels.
func worker(s sample) string {
	e, _ := s.label("engine")
	var wl []string
	for _, n := range page.DefaultWorkerLabels() {
		if v, ok := s.label(n); ok {
			wl = append(wl, n+`="`+v+`"`)
		}
	}
	slices.Sort(wl)
	return e + "|" + strings.Join(wl, ",")
}

// TestLabelEscapesAsPrometheus: a label value's backslash before anything but \, " and n is
// kept as written, as Prometheus' scrape parser keeps it (expfmt refuses the whole page); the
// same page gives vllmstat's lexer the same label values as Prometheus'.
func TestLabelEscapesAsPrometheus(t *testing.T) {
	for _, body := range []string{
		`vllm:num_requests_running{engine="0",model_name="C:\models\z"} 1` + "\n",
		`vllm:num_requests_running{engine="0",model_name="a\fb\\c\"d\ne\t"} 2` + "\n",
		`vllm:num_requests_running{engine="0",model_name="\\\z\\"} 3` + "\n",
		"# TYPE vllm:num_requests_running gauge\n" + `vllm:num_requests_running{model_name="x\y"} 4` + "\n# EOF\n",
	} {
		prom, err := promSamples([]byte(body))
		if err != nil || len(prom) != 1 {
			t.Fatalf("Prometheus reads %d samples of %q: %v", len(prom), body, err)
		}
		var got []sample
		err = expo.Parse([]byte(body), expo.NewNames([]string{"vllm:num_requests_running"}), func(s *expo.Sample) {
			ls := make([]pair, 0, len(s.Labels))
			for _, l := range s.Labels {
				ls = append(ls, pair{l.Name, l.Value})
			}
			smp, err := newSample(s.Name, ls, s.Value)
			if err != nil {
				t.Error(err)
			}
			got = append(got, smp)
		})
		if err != nil {
			t.Fatalf("vllmstat refuses %q: %v", body, err)
		}
		sameSamples(t, "vllmstat", got, prom, 0)
	}
}
