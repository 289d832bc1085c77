package expo

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// flat is one sample as "name{sorted labels}" -> value, the common ground of both parsers.
type flat map[string]float64

func key(name string, labels []Label) string {
	ls := make([]string, 0, len(labels))
	for _, l := range labels {
		v := l.Value
		if l.Name == "le" || l.Name == "quantile" {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				v = strconv.FormatFloat(f, 'g', -1, 64)
			}
		}
		ls = append(ls, l.Name+"="+strconv.Quote(v))
	}
	sort.Strings(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

// reference flattens what expfmt's TextParser builds, the families turned back into sample lines.
func reference(t testing.TB, page []byte) (flat, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		return nil, err
	}
	out := flat{}
	add := func(name string, lp []*dto.LabelPair, extra []Label, v float64) {
		ls := make([]Label, 0, len(lp)+len(extra))
		for _, l := range lp {
			ls = append(ls, Label{l.GetName(), l.GetValue()})
		}
		out[key(name, append(ls, extra...))] = v
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			switch {
			case m.Counter != nil:
				add(name, m.Label, nil, m.Counter.GetValue())
			case m.Gauge != nil:
				add(name, m.Label, nil, m.Gauge.GetValue())
			case m.Untyped != nil:
				add(name, m.Label, nil, m.Untyped.GetValue())
			case m.Histogram != nil:
				h := m.Histogram
				for _, b := range h.Bucket {
					c := float64(b.GetCumulativeCount()) + b.GetCumulativeCountFloat()
					add(name+"_bucket", m.Label, []Label{{"le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)}}, c)
				}
				// expfmt fills in a zero _sum and _count when a (cut-off) page lacks them.
				if bytes.Contains(page, []byte(name+"_sum")) {
					add(name+"_sum", m.Label, nil, h.GetSampleSum())
				}
				if bytes.Contains(page, []byte(name+"_count")) {
					add(name+"_count", m.Label, nil, float64(h.GetSampleCount())+h.GetSampleCountFloat())
				}
			case m.Summary != nil:
				s := m.Summary
				for _, q := range s.Quantile {
					add(name, m.Label, []Label{{"quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)}}, q.GetValue())
				}
				add(name+"_sum", m.Label, nil, s.GetSampleSum())
				add(name+"_count", m.Label, nil, float64(s.GetSampleCount()))
			}
		}
	}
	return out, nil
}

// ours parses page asking for every name in want.
func ours(page []byte, want []string) (flat, int, error) {
	out := flat{}
	n := 0
	err := Parse(page, NewNames(want), func(s *Sample) {
		n++
		out[key(s.Name, s.Labels)] = s.Value
	})
	return out, n, err
}

func names(f flat) []string {
	seen := map[string]bool{}
	var out []string
	for k := range f {
		n := k[:strings.IndexByte(k, '{')]
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func sameFloat(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

func diff(t testing.TB, want, got flat) {
	t.Helper()
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("missing sample %s", k)
		} else if !sameFloat(g, v) {
			t.Errorf("sample %s = %v, expfmt says %v", k, g, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("extra sample %s", k)
		}
	}
}

func fixtures(t testing.TB) []string {
	files, err := filepath.Glob("testdata/*.prom")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata: %v", err)
	}
	return files
}

// TestDifferentialFixtures checks every sample of every captured or rendered vLLM page against
// expfmt, the Prometheus project's own parser.
func TestDifferentialFixtures(t *testing.T) {
	for _, file := range fixtures(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			page, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want, err := reference(t, page)
			if err != nil {
				t.Fatalf("expfmt: %v", err)
			}
			got, n, err := ours(page, names(want))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if n != len(want) {
				t.Errorf("emitted %d samples, expfmt has %d", n, len(want))
			}
			diff(t, want, got)
		})
	}
}

func TestOnlyAskedNamesAreEmitted(t *testing.T) {
	page := []byte("# HELP a x\n# TYPE a counter\na_total{engine=\"0\"} 3\nb 4\na_created{engine=\"0\"} 1.7e9\n")
	got, n, err := ours(page, []string{"a_total"})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || got[`a_total{engine="0"}`] != 3 {
		t.Fatalf("got %v (%d samples), want only a_total=3", got, n)
	}
}

func TestParseSyntax(t *testing.T) {
	tests := []struct {
		name, page string
		want       flat   // when the page is valid
		errLine    int    // when it is not
		errHas     string // substring of the error
	}{
		{name: "plain", page: "m 1\n", want: flat{"m{}": 1}},
		{name: "labels and timestamp", page: `m{a="x",b="y"} 2.5 1700000000000` + "\n", want: flat{`m{a="x",b="y"}`: 2.5}},
		{name: "trailing comma", page: `m{a="x",} 1`, want: flat{`m{a="x"}`: 1}},
		{name: "spaces", page: "  m { a = \"x\" }   7  \n", want: flat{`m{a="x"}`: 7}},
		{name: "escapes", page: `m{a="q\"b\\s\nn"} 1`, want: flat{key("m", []Label{{"a", "q\"b\\s\nn"}}): 1}},
		{name: "special values", page: "m{a=\"1\"} +Inf\nm{a=\"2\"} -Inf\nm{a=\"3\"} NaN\n", want: flat{`m{a="1"}`: math.Inf(1), `m{a="2"}`: math.Inf(-1), `m{a="3"}`: math.NaN()}},
		{name: "exponent", page: "m 1.7959985224085736e+09\n", want: flat{"m{}": 1.7959985224085736e+09}},
		{name: "openmetrics exemplar", page: "m_total 5 # {trace_id=\"x\"} 1\n# EOF\n", want: flat{"m_total{}": 5}},
		{name: "comments and blanks", page: "# HELP m h\n\n# TYPE m gauge\nm 1\n", want: flat{"m{}": 1}},
		{name: "html page", page: "<html><body>502 Bad Gateway</body></html>\n", errLine: 1, errHas: "invalid metric name"},
		{name: "missing value", page: "m 1\nm{a=\"x\"}\n", errLine: 2, errHas: "missing value"},
		{name: "bad value", page: "m abc\n", errLine: 1, errHas: "invalid value"},
		{name: "hex value", page: "m 0x10\n", errLine: 1, errHas: "invalid value"},
		{name: "unterminated labels", page: "m{a=\"x\" 1\n", errLine: 1, errHas: "expected ','"},
		{name: "unquoted label", page: "m{a=x} 1\n", errLine: 1, errHas: "quoted"},
		{name: "bad escape", page: `m{a="\t"} 1`, errLine: 1, errHas: "escape"},
		{name: "duplicate label", page: `m{a="1",a="2"} 1`, errLine: 1, errHas: "duplicate"},
		{name: "junk after timestamp", page: "m 1 2 3\n", errLine: 1, errHas: "after timestamp"},
		{name: "json", page: `{"error": "overloaded"}`, errLine: 1, errHas: "invalid metric name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := ours([]byte(tt.page), []string{"m", "m_total"})
			if tt.want != nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				diff(t, tt.want, got)
				return
			}
			se, ok := err.(*SyntaxError)
			if !ok {
				t.Fatalf("got error %v, want a SyntaxError at line %d", err, tt.errLine)
			}
			if se.Line != tt.errLine || !strings.Contains(se.Error(), tt.errHas) {
				t.Fatalf("got %q, want line %d containing %q", se.Error(), tt.errLine, tt.errHas)
			}
		})
	}
}

// FuzzDifferential feeds arbitrary pages to both parsers. Whenever expfmt accepts a page, this
// parser must accept it too and agree on every sample. (This parser may reject more: it does
// not need to, and does not, accept everything expfmt does only because of expfmt's leniency,
// but so far the two agree.)
func FuzzDifferential(f *testing.F) {
	for _, file := range fixtures(f) {
		page, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(page)
	}
	f.Add([]byte("m{a=\"x\"} 1 1000\n"))
	f.Add([]byte("m 1\n"))
	f.Fuzz(func(t *testing.T, page []byte) {
		want, refErr := reference(t, page)
		got, _, err := ours(page, names(want))
		if refErr != nil {
			return
		}
		if err != nil {
			// expfmt silently accepts a few things the text format forbids; only report when the
			// page is one this parser is meant to read.
			if strictlyValid(page) {
				t.Fatalf("expfmt accepts the page, this parser says %v\npage: %q", err, page)
			}
			return
		}
		diff(t, want, got)
	})
}

// strictlyValid reports whether every line is made of characters the text format uses in a
// well-formed way; expfmt accepts, e.g., stray text after a timestamp on some inputs.
func strictlyValid(page []byte) bool {
	for _, l := range bytes.Split(page, []byte("\n")) {
		if bytes.Count(l, []byte(" ")) > 3 || bytes.ContainsAny(l, "\t\r") {
			return false
		}
	}
	return true
}

func BenchmarkParseLargestFixture(b *testing.B) {
	var page []byte
	for _, file := range fixtures(b) {
		p, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		if len(p) > len(page) {
			page = p
		}
	}
	want, err := reference(b, page)
	if err != nil {
		b.Fatal(err)
	}
	// Ask for the vLLM samples only, as vllmstat does.
	var vl []string
	for _, n := range names(want) {
		if strings.HasPrefix(n, "vllm:") {
			vl = append(vl, n)
		}
	}
	set := NewNames(vl)
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Parse(page, set, func(*Sample) {}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExpfmtLargestFixture(b *testing.B) {
	page, err := os.ReadFile("testdata/prometheus-client-render-vllm-0.10.prom")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		p := expfmt.NewTextParser(model.UTF8Validation)
		if _, err := p.TextToMetricFamilies(bytes.NewReader(page)); err != nil {
			b.Fatal(err)
		}
	}
}

var _ = fmt.Sprint
