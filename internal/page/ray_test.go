package page

import (
	"errors"
	"maps"
	"regexp"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The Ray fixture: two Ray Serve LLM replicas on one node, both engine="0" (the fixture
// ray-serve-llm-two-replicas-next.prom is their next scrape, for the packages that read pages).
const (
	rayPage  = "ray-serve-llm-two-replicas.prom"
	replicaA = `ReplicaId="k7qz2m1d",WorkerId="5f1c0a9e3b7d2c4e8a6f0b1d3c5e7a9b2d4f6a8c0e1b3d5f7a9c2e4b"`
	replicaB = `ReplicaId="p3xw9c4e",WorkerId="a2e4c6b8d0f1a3c5e7b9d2f4a6c8e0b1d3f5a7c9e2b4d6f8a0c1e3b5"`
)

func parseWith(t *testing.T, body []byte, wl []string) *Page {
	t.Helper()
	p, err := ParsePageOptions(body, Options{WorkerLabels: wl})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// rayWant is what each replica's page says.
var rayWant = map[string]struct {
	running, kv, queries float64
}{
	replicaA: {3, 0.42, 120000},
	replicaB: {5, 0.61, 90000},
}

func TestRayReplicasAreWorkers(t *testing.T) {
	p := load(t, rayPage)
	if len(p.Engines) != 2 {
		t.Fatalf("workers %d, want 2 (one per replica)", len(p.Engines))
	}
	for i, labels := range []string{replicaA, replicaB} {
		ep := p.Engines[i]
		if ep.Engine != "0" || ep.Labels != labels {
			t.Fatalf("worker %d: engine %q labels %s, want engine 0 labels %s", i, ep.Engine, ep.Labels, labels)
		}
		w := rayWant[labels]
		if ep.Gauges[vllm.Running] != w.running || ep.Gauges[vllm.KVUsage] != w.kv {
			t.Errorf("%s: running %v kv %v, want %v and %v", labels, ep.Gauges[vllm.Running], ep.Gauges[vllm.KVUsage], w.running, w.kv)
		}
		if q, _, n := counter(ep, vllm.PrefixQueries); q != w.queries || n != 1 {
			t.Errorf("%s: prefix queries %v over %d series, want %v over 1", labels, q, n, w.queries)
		}
		if len(ep.Hists) != 2 {
			t.Errorf("%s: %d histograms, want 2", labels, len(ep.Hists))
		}
		// Ray's other tags stay in the series keys; the worker labels and engine do not.
		for _, cs := range ep.Counters {
			for _, want := range []string{`Component="core_worker"`, `NodeAddress="10.0.0.5"`, `SessionName="session_`, `Version="2.49.1"`, `model_name="Qwen/Qwen2.5-7B-Instruct"`} {
				if !strings.Contains(cs.Key, want) {
					t.Errorf("%s: series key %s lacks %s", labels, cs.Key, want)
				}
			}
			for _, gone := range []string{"ReplicaId", "WorkerId", "engine"} {
				if strings.Contains(cs.Key, gone) {
					t.Errorf("%s: series key %s holds %s", labels, cs.Key, gone)
				}
			}
		}
	}
}

func TestRayWorkerLabelChoices(t *testing.T) {
	body := readPage(t, rayPage)
	t.Run("none merges the replicas as before", func(t *testing.T) {
		p := parseWith(t, body, []string{})
		if len(p.Engines) != 1 || p.Engines[0].Engine != "0" || p.Engines[0].Labels != "" {
			t.Fatalf("workers %+v, want one, engine 0, no labels", p.Engines)
		}
		ep := p.Engines[0]
		// running adds up, KV usage is the mean; each replica's counter stays its own series.
		if ep.Gauges[vllm.Running] != 8 || ep.Gauges[vllm.KVUsage] != (0.42+0.61)/2 {
			t.Errorf("running %v kv %v, want 8 and %v", ep.Gauges[vllm.Running], ep.Gauges[vllm.KVUsage], (0.42+0.61)/2)
		}
		if q, _, n := counter(ep, vllm.PrefixQueries); q != 210000 || n != 2 {
			t.Errorf("prefix queries %v over %d series, want 210000 over 2", q, n)
		}
	})
	t.Run("ReplicaId alone", func(t *testing.T) {
		p := parseWith(t, body, []string{"ReplicaId"})
		if len(p.Engines) != 2 || p.Engines[0].Labels != `ReplicaId="k7qz2m1d"` || p.Engines[1].Labels != `ReplicaId="p3xw9c4e"` {
			t.Fatalf("workers %+v, want two told apart by ReplicaId", p.Engines)
		}
		if k := p.Engines[0].Counters[0].Key; !strings.Contains(k, "WorkerId=") {
			t.Errorf("series key %s lacks WorkerId, which is not a worker label here", k)
		}
	})
	t.Run("a label no series has", func(t *testing.T) {
		p := parseWith(t, body, []string{"NoSuchLabel"})
		if len(p.Engines) != 1 {
			t.Fatalf("workers %d, want 1", len(p.Engines))
		}
	})
	t.Run("nil is the default", func(t *testing.T) {
		p := parseWith(t, body, nil)
		if len(p.Engines) != 2 || p.Engines[1].Labels != replicaB {
			t.Fatalf("workers %+v, want the two replicas", p.Engines)
		}
	})
}

// TestRaySpellings checks that Ray's other spellings of the same page give the same workers and
// values, and that a page holding a counter both with and without _total (some Ray versions
// export both) counts it once.
func TestRaySpellings(t *testing.T) {
	body := string(readPage(t, rayPage))
	want := parseWith(t, []byte(body), nil)
	withoutTotal := regexp.MustCompile(`(?m)^(ray_vllm_[a-z_]+)_total\{`)
	both := body + withoutTotal.ReplaceAllString(strings.Join(regexp.MustCompile(`(?m)^ray_vllm_[a-z_]+_total\{.*$`).FindAllString(body, -1), "\n"), "$1{") + "\n"
	if !strings.Contains(both, "\nray_vllm_prefix_cache_queries{") {
		t.Fatal("the page with both counter forms lacks the form without _total")
	}
	for name, page := range map[string]string{
		"colon (older Ray)":         strings.ReplaceAll(body, "ray_vllm_", "ray_vllm:"),
		"counters with and without": both,
	} {
		t.Run(name, func(t *testing.T) {
			got := parseWith(t, []byte(page), nil)
			if len(got.Engines) != len(want.Engines) {
				t.Fatalf("workers %d, want %d", len(got.Engines), len(want.Engines))
			}
			for i := range want.Engines {
				g, w := got.Engines[i], want.Engines[i]
				if g.Labels != w.Labels || g.Gauges != w.Gauges || len(g.Counters) != len(w.Counters) || len(g.Hists) != len(w.Hists) {
					t.Fatalf("worker %s: %+v, want %+v", w.Labels, g, w)
				}
				for j := range w.Counters {
					if g.Counters[j] != w.Counters[j] {
						t.Errorf("counter %+v, want %+v", g.Counters[j], w.Counters[j])
					}
				}
			}
		})
	}
}

func TestRayWorkerLimit(t *testing.T) {
	body := readPage(t, rayPage)
	if _, err := ParsePageLimits(body, Limits{MaxWorkers: 2}); err != nil {
		t.Fatalf("two replicas within a limit of 2 workers: %v", err)
	}
	_, err := ParsePageLimits(body, Limits{MaxWorkers: 1})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), `engine "0" with `+replicaB+` is one more than the limit of 1 workers`) {
		t.Fatalf("error %v, want the second replica over the limit of 1 worker", err)
	}
	if _, err := ParsePageOptions(body, Options{Limits: Limits{MaxWorkers: 1}, WorkerLabels: []string{}}); err != nil {
		t.Fatalf("merged replicas are one worker: %v", err)
	}
}

func TestCheckWorkerLabels(t *testing.T) {
	for _, tt := range []struct {
		names []string
		want  string // error substring, "" for none
	}{
		{nil, ""},
		{DefaultWorkerLabels(), ""},
		{[]string{"ReplicaId", "model_name", "_x9"}, ""},
		{[]string{"engine"}, `"engine" cannot be a worker label`},
		{[]string{"le"}, `"le" cannot be a worker label`},
		{[]string{"finished_reason"}, `"finished_reason" cannot be a worker label`},
		{[]string{"9lives"}, `"9lives" is not a label name`},
		{[]string{""}, `"" is not a label name`},
		{[]string{"Replica-Id"}, `"Replica-Id" is not a label name`},
		{[]string{"WorkerId", "WorkerId"}, `"WorkerId" is given twice`},
	} {
		err := CheckWorkerLabels(tt.names)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("CheckWorkerLabels(%q) = %v, want %q", tt.names, err, tt.want)
		}
	}
}

func TestLabelKeyRoundTrip(t *testing.T) {
	for _, m := range []map[string]string{
		nil,
		{"ReplicaId": "r1"},
		{"WorkerId": "w", "ReplicaId": "r"},
		{"a": `x="1",b="2"`, "b": "back\\slash\nnew line", "c": ""},
	} {
		k := LabelKey(m)
		if got := LabelMap(k); !maps.Equal(got, m) {
			t.Errorf("LabelMap(LabelKey(%q)) = %q via %s", m, got, k)
		}
	}
	// The key of a page's worker is what LabelKey makes of its labels.
	p := load(t, rayPage)
	if m := LabelMap(p.Engines[0].Labels); LabelKey(m) != replicaA || m["ReplicaId"] != "k7qz2m1d" {
		t.Errorf("labels %q from %s", m, p.Engines[0].Labels)
	}
	for _, bad := range []string{`x`, `x="1`, `x="1"y="2"`, `="1"`} {
		if m := LabelMap(bad); m != nil {
			t.Errorf("LabelMap(%s) = %q, want nil", bad, m)
		}
	}
}

func BenchmarkParsePageRay(b *testing.B) {
	body := readPage(b, rayPage)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParsePage(body); err != nil {
			b.Fatal(err)
		}
	}
}
