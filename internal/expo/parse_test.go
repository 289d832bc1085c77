package expo

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllmstat/vllmstat/internal/testkit"
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

// typedAsUntyped matches the TYPE lines of histograms and summaries, spelt as expfmt reads them.
var typedAsUntyped = regexp.MustCompile(`(?m)^([ \t]*#[ \t]*TYPE[ \t]+[^ \t\n]+[ \t]+)(?i:histogram|gauge_?histogram|summary)$`)

// reference flattens what expfmt's TextParser reads from page into sample lines.
//
// expfmt checks the page against its declared types, but for a histogram or summary it builds
// one metric per label set (le and quantile aside): it fills in a zero _sum and _count for a
// label set that has only buckets, drops an le label from a _sum or _count line, and drops a
// bucket line without le. This parser hands out every sample line as written, which is what
// vllmstat matches against. So to compare like with like, the page is read once as it is (does
// expfmt accept it?), and once more with its histograms and summaries declared untyped, which
// makes expfmt give every sample line with its own labels.
func reference(t testing.TB, page []byte) (flat, error) {
	if _, err := expfmtParse(page); err != nil {
		return nil, err
	}
	// Read as untyped, a page can fail where the typed reading passed: expfmt does not look for
	// a duplicate le label, which the format forbids as any duplicate label. Such a page is one
	// expfmt rejects when it reads each line as written.
	fams, err := expfmtParse(typedAsUntyped.ReplaceAll(page, []byte("${1}untyped")))
	if err != nil {
		return nil, err
	}
	out := flat{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			ls := make([]Label, 0, len(m.Label))
			for _, l := range m.Label {
				ls = append(ls, Label{l.GetName(), l.GetValue()})
			}
			var v float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Untyped != nil:
				v = m.Untyped.GetValue()
			default:
				t.Fatalf("harness: family %q is still %v after declaring it untyped\npage: %q", name, f.GetType(), page)
			}
			out[key(name, ls)] = v
		}
	}
	return out, nil
}

func expfmtParse(page []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(page))
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

// TestDifferentialFixtures checks every sample of every captured or rendered vLLM page against
// expfmt, the Prometheus project's own parser.
func TestDifferentialFixtures(t *testing.T) {
	for _, file := range testkit.Fixtures(t, "*.prom") {
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
		{name: "html page", page: "<html><body>502 Bad Gateway</body></html>\n", errLine: 1, errHas: "column 1: not a sample line"},
		{name: "missing value", page: "m 1\nm{a=\"x\"}\n", errLine: 2, errHas: "missing value"},
		{name: "bad value", page: "m abc\n", errLine: 1, errHas: "invalid value"},
		{name: "hex value", page: "m 0x10\n", errLine: 1, errHas: "invalid value"},
		{name: "unterminated labels", page: "m{a=\"x\" 1\n", errLine: 1, errHas: "expected ','"},
		{name: "unquoted label", page: "m{a=x} 1\n", errLine: 1, errHas: "quoted"},
		// Only \\, \" and \n are escapes; any other backslash stays as written, as Prometheus'
		// scrape parser reads it (its lexer takes a backslash and the byte after it as a pair,
		// and only those three pairs are replaced).
		{name: "unknown escape kept", page: `m{a="\t"} 1` + "\n", want: flat{key("m", []Label{{"a", `\t`}}): 1}},
		{name: "unknown escapes among known ones", page: `m{a="C:\z\f\\x\"q\n",b="\\\z"} 1` + "\n",
			want: flat{key("m", []Label{{"a", "C:\\z\\f\\x\"q\n"}, {"b", `\\z`}}): 1}},
		{name: "unknown escape in a long value", page: `m{a="0123456789abcdef\z0123456789"} 1` + "\n", want: flat{key("m", []Label{{"a", `0123456789abcdef\z0123456789`}}): 1}},
		{name: "unknown escape before a quote", page: `m{a="x\z",a2="\y"} 1` + "\n", want: flat{key("m", []Label{{"a", `x\z`}, {"a2", `\y`}}): 1}},
		{name: "backslash escaping the closing quote", page: `m{a="x\"} 1` + "\n", errLine: 1, errHas: "unterminated"},
		{name: "duplicate after an unknown escape", page: `m{a="\z",a="2"} 1` + "\n", errLine: 1, errHas: "duplicate"},
		{name: "duplicate label", page: `m{a="1",a="2"} 1`, errLine: 1, errHas: "duplicate"},
		{name: "similar label names", page: "m{ ab = \"x\\\"y\\\\\" , ac=\"2\",ad=\"\\n\",ba=\"3\"} 1\n", want: flat{key("m", []Label{{"ab", "x\"y\\"}, {"ac", "2"}, {"ad", "\n"}, {"ba", "3"}}): 1}},
		{name: "duplicate after similar names", page: "other{ab=\"x\\\"\",ac=\"2\" , ab=\"3\"} 1\n", errLine: 1, errHas: "column 25: duplicate label: a label name of 2 bytes"},
		{name: "duplicate label on a line not asked for", page: "m 1\nother{a=\"1\",a=\"2\"} 1\n", errLine: 2, errHas: "duplicate"},
		{name: "UTF-8 label value", page: "m{a=\"modèle 日本\"} 1\n", want: flat{key("m", []Label{{"a", "modèle 日本"}}): 1}},
		{name: "UTF-8 HELP", page: "# HELP m Anzahl – gemäß\nm 1\n", want: flat{"m{}": 1}},
		{name: "invalid UTF-8 in a plain comment", page: "# \xff\nm 1\n", want: flat{"m{}": 1}},
		{name: "invalid UTF-8 label value", page: "m 1\nm{a=\"x\xffy\"} 1\n", errLine: 2, errHas: "column 6: invalid UTF-8 in a label value of 3 bytes"},
		{name: "truncated UTF-8 label value", page: "m{a=\"\xe6\x97\"} 1\n", errLine: 1, errHas: "invalid UTF-8 in a label value"},
		{name: "invalid UTF-8 label value on a line not asked for", page: "other{a=\"\xff\"} 1\n", errLine: 1, errHas: "invalid UTF-8"},
		{name: "invalid UTF-8 HELP", page: "m 1\n\n# HELP m caf\xe9\n", errLine: 3, errHas: "column 3: invalid UTF-8 in a HELP line"},
		{name: "invalid UTF-8 TYPE", page: "#  TYPE m\xff gauge\n", errLine: 1, errHas: "column 4: invalid UTF-8 in a TYPE line"},
		{name: "invalid UTF-8 metric name", page: "m\xff 1\n", errLine: 1, errHas: "non-ASCII byte"},
		{name: "invalid UTF-8 label name", page: "m{a\xff=\"1\"} 1\n", errLine: 1, errHas: "non-ASCII byte"},
		{name: "junk after timestamp", page: "m 1 2 3\n", errLine: 1, errHas: "column 7: unexpected text after the timestamp"},
		{name: "json", page: `{"error": "overloaded"}`, errLine: 1, errHas: "column 1: not a sample line"},
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

// TestInvalidUTF8 compares this parser with expfmt on pages that are not valid UTF-8. Both
// reject a label value or metric name that is not; a HELP line expfmt lets through, but the
// format is UTF-8 and Prometheus' own scrape refuses such a page, so this parser does too.
func TestInvalidUTF8(t *testing.T) {
	tests := []struct {
		name, page    string
		line          int
		expfmtRejects bool
	}{
		{"label value", "m{a=\"ok\"} 1\nm{a=\"\xc3\x28\"} 2\n", 2, true},
		{"label value of another metric", "m 1\nn{a=\"\xff\"} 2\n", 2, true},
		{"overlong encoding", "m{a=\"\xc0\xaf\"} 1\n", 1, true},
		{"surrogate half", "m{a=\"\xed\xa0\x80\"} 1\n", 1, true},
		{"metric name", "m\xff{a=\"1\"} 1\n", 1, true},
		{"HELP text", "# HELP m caf\xe9\n# TYPE m gauge\nm 1\n", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := []byte(tt.page)
			if _, err := reference(t, page); (err != nil) != tt.expfmtRejects {
				t.Errorf("expfmt: error %v, want rejected=%v", err, tt.expfmtRejects)
			}
			_, _, err := ours(page, []string{"m", "n"})
			var se *SyntaxError
			if !errors.As(err, &se) || se.Line != tt.line {
				t.Fatalf("got %v, want a syntax error on line %d", err, tt.line)
			}
		})
	}
}

// FuzzDifferential feeds arbitrary pages to both parsers. Whenever expfmt accepts a page that
// keeps to the format (strictlyValid), this parser must accept it too and agree on every
// sample. The two need not agree on the rest: expfmt lets a few things through that the
// format forbids, and refuses a trailing blank, which this parser reads. The small seeds, one
// family or one odd spelling each, are in testdata/fuzz/FuzzDifferential; one whole page seeds
// the mix of families a real server sends.
func FuzzDifferential(f *testing.F) {
	page := testkit.ReadFixture(f, "vllm-0.10.0-glm45-issue-excerpt-a.prom")
	f.Add(page)
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

// A sample line's name and label set as the text format (version 0.0.4, which vllmstat asks
// for) spells them: plain names, quoted values.
var (
	labelPair  = `[a-zA-Z_][a-zA-Z0-9_]*[ \t]*=[ \t]*"(?:[^"\\]|\\.)*"[ \t]*`
	sampleHead = regexp.MustCompile(`^[ \t]*[a-zA-Z_:][a-zA-Z0-9_:]*[ \t]*(?:\{[ \t]*(?:` + labelPair + `(?:,[ \t]*` + labelPair + `)*,?)?[ \t]*\})?[ \t]*`)
)

// strictlyValid reports whether page keeps to the format beyond what expfmt checks: it is UTF-8
// throughout (expfmt does not check HELP text; Prometheus does, and so does this parser), and
// no sample line quotes its metric or label names (expfmt reads those, from a newer version of
// the format that a server only sends when asked).
func strictlyValid(page []byte) bool {
	if !utf8.Valid(page) {
		return false
	}
	for _, l := range bytes.Split(page, []byte("\n")) {
		if l = bytes.TrimLeft(l, " \t"); len(l) == 0 || l[0] == '#' {
			continue
		}
		m := sampleHead.FindIndex(l)
		if m == nil || m[1] < len(l) && (l[m[1]] == '"' || l[m[1]] == '{') {
			return false
		}
	}
	return true
}

func BenchmarkParseLargestFixture(b *testing.B) {
	var page []byte
	for _, file := range testkit.Fixtures(b, "*.prom") {
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
	page := testkit.ReadFixture(b, "prometheus-client-render-vllm-0.10.prom")
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

// TestSyntaxErrorsShowNoBytes: a syntax error says what is wrong, on which line and column,
// and how long the bad token is, but never quotes the page, whose bytes may be anything a
// server holds (a token, a password): every kind of error, with a marker in the token at fault.
func TestSyntaxErrorsShowNoBytes(t *testing.T) {
	const m = "s3cr3tMark"
	for _, tt := range []struct {
		page string
		line int
		col  int
	}{
		{"<html><body>" + m + "</body></html>\n", 1, 1},
		{`{"token": "` + m + `"}` + "\n", 1, 1},
		{m + " is the token\n", 1, 12},
		{"m 1\nm " + m + "\n", 2, 3},
		{"m{a=\"1\"} " + m + "\n", 1, 10},
		{"m 1 " + m + "\n", 1, 5},
		{"m 1 17 " + m + "\n", 1, 8},
		{m + "\xff 1\n", 1, 11},
		{"m{" + m + "\xff=\"1\"} 1\n", 1, 13},
		{"m{" + m + " 1\n", 1, 14},
		{"m{" + m + "=1} 1\n", 1, 14},
		{"m{" + m + "} 1\n", 1, 13},
		{"m{-" + m + "=\"1\"} 1\n", 1, 3},
		{"m{a=\"" + m + "\" " + m + "} 1\n", 1, 18},
		{"m{a=\"" + m + "} 1\n", 1, 6},
		{"m{" + m + "=\"1\"," + m + "=\"2\"} 1\n", 1, 18},
		{"m{a=\"" + m + "\xff\"} 1\n", 1, 6},
		{"# HELP m " + m + "\xff\n", 1, 3},
		{"m{a=\"1\"" + m, 1, 8},
	} {
		_, _, err := ours([]byte(tt.page), []string{"m", m})
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: error %v, want a syntax error", tt.page, err)
			continue
		}
		if strings.Contains(err.Error(), m[:6]) || se.Line != tt.line || se.Col != tt.col {
			t.Errorf("%q: error %q, want line %d, column %d, and no byte of the page", tt.page, err, tt.line, tt.col)
		}
	}
}
