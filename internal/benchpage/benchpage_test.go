package benchpage

import (
	"bytes"
	"math"
	"strconv"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/pyfloat"
	"github.com/vllmstat/vllmstat/internal/testkit"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

func pages(t *testing.T) map[string][]byte {
	return map[string][]byte{"ray-256KB": Ray(256 << 10),
		"vllm-0.10": testkit.ReadFixture(t, "prometheus-client-render-vllm-0.10.prom"),
		"vllm-0.20": testkit.ReadFixture(t, "prometheus-client-render-vllm-0.20.prom")}
}

// check parses body with expfmt, which must accept it, and returns what package page reads of it.
func check(t *testing.T, body []byte) *page.Page {
	t.Helper()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := tp.TextToMetricFamilies(bytes.NewReader(body)); err != nil {
		t.Fatalf("expfmt: %v", err)
	}
	p, err := page.ParsePage(body)
	if err != nil {
		t.Fatalf("ParsePage: %v", err)
	}
	return p
}

func TestRayPage(t *testing.T) {
	for _, size := range []int{256 << 10, 1 << 20} {
		page := Ray(size)
		if len(page) < size*9/10 || len(page) > size*11/10 {
			t.Errorf("Ray(%d) is %d bytes", size, len(page))
		}
		if !bytes.Equal(page, Ray(size)) {
			t.Errorf("Ray(%d) differs from one call to the next", size)
		}
		p := check(t, page)
		if len(p.Engines) != 2 {
			t.Fatalf("Ray(%d): %d workers, want the two replicas", size, len(p.Engines))
		}
		for _, ep := range p.Engines {
			if ep.Engine != "0" || len(ep.Hists) != 4 || len(ep.Counters) != 8 || !ep.HasGauge[vllm.KVUsage] {
				t.Errorf("Ray(%d): worker %q %s: %d histograms, %d counters, kv %v", size, ep.Engine, ep.Labels, len(ep.Hists), len(ep.Counters), ep.HasGauge[vllm.KVUsage])
			}
		}
	}
}

// TestVariant checks that a variant has the same lines up to their values, that counters and
// buckets grow with k, buckets stay cumulative with _count equal to +Inf, and gauges move.
func TestVariant(t *testing.T) {
	for name, page := range pages(t) {
		t.Run(name, func(t *testing.T) {
			base := check(t, page)
			prev := page
			for k := 1; k <= 3; k++ {
				v := Variant(page, k)
				if bytes.Equal(v, prev) {
					t.Fatalf("k=%d: same bytes as before", k)
				}
				a, b := bytes.Split(page, []byte("\n")), bytes.Split(v, []byte("\n"))
				if len(a) != len(b) {
					t.Fatalf("k=%d: %d lines, want %d", k, len(b), len(a))
				}
				moved := 0
				for i := range a {
					sa, oka := splitSample(a[i])
					sb, okb := splitSample(b[i])
					if oka != okb || !bytes.Equal(a[i][:sa.valStart], b[i][:sb.valStart]) || !bytes.Equal(a[i][sa.valEnd:], b[i][sb.valEnd:]) {
						t.Fatalf("k=%d line %d: %q became %q", k, i+1, a[i], b[i])
					}
					if oka && !bytes.Equal(sa.value(a[i]), sb.value(b[i])) {
						moved++
					}
				}
				if moved < len(a)/3 {
					t.Errorf("k=%d: only %d of %d lines changed value", k, moved, len(a))
				}
				p := check(t, v)
				if len(p.Engines) != len(base.Engines) {
					t.Fatalf("k=%d: %d workers, want %d", k, len(p.Engines), len(base.Engines))
				}
				for e, ep := range p.Engines {
					was := base.Engines[e]
					for c, cs := range ep.Counters {
						if cs.Key != was.Counters[c].Key || cs.Value < was.Counters[c].Value {
							t.Errorf("k=%d: counter %s went from %v to %v", k, cs.Key, was.Counters[c].Value, cs.Value)
						}
						// a _created that moved reads as the engine's restart (prometheus_client
						// types a counter's _created as a gauge family of its own)
						if cs.HasCreated != was.Counters[c].HasCreated || cs.Created != was.Counters[c].Created {
							t.Errorf("k=%d: counter %s created at %v, was %v", k, cs.Key, cs.Created, was.Counters[c].Created)
						}
					}
					for h, hs := range ep.Hists {
						if hs.HasCreated != was.Hists[h].HasCreated || hs.Created != was.Hists[h].Created {
							t.Errorf("k=%d: histogram %s created at %v, was %v", k, hs.Key, hs.Created, was.Hists[h].Created)
						}
						last := math.Inf(-1)
						for j, bk := range hs.Buckets {
							if bk.Count < last || bk.Count < was.Hists[h].Buckets[j].Count {
								t.Errorf("k=%d: %s bucket le=%v: %v after %v, was %v", k, hs.Key, bk.Le, bk.Count, last, was.Hists[h].Buckets[j].Count)
							}
							last = bk.Count
						}
						if hs.Count != last {
							t.Errorf("k=%d: %s count %v, +Inf bucket %v", k, hs.Key, hs.Count, last)
						}
					}
				}
				prev = v
			}
		})
	}
}

func TestPyFloat(t *testing.T) {
	for v, want := range map[float64]string{123: "123.0", 1.7329876543e9: "1.7329876543e+09", 0.42: "0.42", 1e-5: "1e-05", 3.3636352e7: "3.3636352e+07", math.Inf(1): "+Inf"} {
		if got := string(pyfloat.AppendGo(nil, v)); got != want {
			t.Errorf("%v printed %q, want %q", v, got, want)
		}
		if f, err := strconv.ParseFloat(want, 64); err != nil || f != v {
			t.Errorf("%q reads back as %v", want, f)
		}
	}
}
