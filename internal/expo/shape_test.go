package expo

import (
	"bytes"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/vllmstat/vllmstat/internal/testkit"
)

// emitted parses page in full and returns the values it emits, asking for every name in want.
func emitted(page []byte, want *Names) ([]float64, error) {
	var vs []float64
	err := Parse(page, want, func(s *Sample) { vs = append(vs, s.Value) })
	return vs, err
}

// allNames asks for every sample name of page that has one.
func allNames(page []byte) *Names {
	seen := map[string]bool{}
	var ns []string
	for _, l := range bytes.Split(page, []byte("\n")) {
		l = bytes.TrimLeft(l, " \t")
		i := bytes.IndexAny(l, "{ \t")
		if i <= 0 || l[0] == '#' || seen[string(l[:i])] {
			continue
		}
		seen[string(l[:i])] = true
		ns = append(ns, string(l[:i]))
	}
	return NewNames(ns)
}

// moveValues rewrites the value of each sample line of page whose last field is a number.
func moveValues(page []byte, to func(float64) string) []byte {
	lines := bytes.Split(page, []byte("\n"))
	for i, l := range lines {
		j := bytes.LastIndexByte(l, ' ')
		if len(l) == 0 || l[0] == '#' || j < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(string(l[j+1:]), 64); err == nil {
			lines[i] = append(l[:j+1:j+1], to(v)...)
		}
	}
	return bytes.Join(lines, []byte("\n"))
}

// checkReplay remembers a, replays b and compares with a full parse of b: a replay that
// succeeds must give what the full parse gives, bit for bit.
func checkReplay(t *testing.T, a, b []byte, names *Names) bool {
	t.Helper()
	var sh Shape
	if err := sh.Parse(a, names, func(*Sample) {}); err != nil {
		if sh.Replay(b, make([]float64, 1<<10)) {
			t.Fatalf("replay after a failed parse")
		}
		return false
	}
	vals := make([]float64, sh.Wanted())
	if !sh.Replay(b, vals) {
		return false
	}
	want, err := emitted(b, names)
	if err != nil {
		t.Fatalf("replay accepted a page that Parse refuses: %v\nfirst: %q\nnext: %q", err, a, b)
	}
	if len(want) != len(vals) {
		t.Fatalf("replay gave %d values, Parse emits %d\nfirst: %q\nnext: %q", len(vals), len(want), a, b)
	}
	for i := range want {
		if math.Float64bits(want[i]) != math.Float64bits(vals[i]) {
			t.Fatalf("value %d: replay %v, Parse %v\nfirst: %q\nnext: %q", i, vals[i], want[i], a, b)
		}
	}
	return true
}

// TestReplay checks which successors of a page replay, and that those give the full parse's values.
func TestReplay(t *testing.T) {
	base := "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\",y=\"2\"} 3.0\n  b 4\t5\nc{le=\"+Inf\"}  7.5e-1 # {t=\"x\"} 1\n\n"
	names := NewNames([]string{"a_total", "b", "c"})
	for _, tt := range []struct {
		next string
		hit  bool
	}{
		{base, true},
		{strings.NewReplacer("3.0", "4.0", "4\t5", "-0.0\t6", "7.5e-1", "NaN").Replace(base), true},
		{strings.TrimSuffix(base, "\n"), false},         // one (blank) line fewer: parsed in full
		{strings.Replace(base, "3.0", "+Inf", 1), true}, // any value
		{strings.Replace(base, "3.0", "3.0 1700000000000", 1), true},
		{strings.Replace(base, "3.0", "3.0 17e", 1), false},   // a bad timestamp
		{strings.Replace(base, "3.0", "0x1p3", 1), false},     // a value the format refuses
		{strings.Replace(base, "3.0", "1_000", 1), false},     //
		{strings.Replace(base, "3.0", " 3.0", 1), false},      // another layout
		{strings.Replace(base, "3.0", "3.0\r", 1), false},     //
		{strings.Replace(base, "3.0", "", 1), false},          // no value
		{strings.Replace(base, "A.", "B.", 1), true},          // another comment: Parse reads none
		{strings.Replace(base, "# TYPE", "x TYPE", 1), false}, // not a comment
		{strings.Replace(base, "A.", "\xff.", 1), false},      // a HELP line Parse refuses
		{strings.Replace(base, "A.", "A.\n# another", 1), false},
		{strings.Replace(base, "y=\"2\"", "y=\"3\"", 1), false}, // other labels
		{base + "d 1\n", false},
		{base[:strings.Index(base, "  b")], false},
		{strings.Replace(base, "\n\n", "\n\n\n", 1), false},
		{strings.Replace(base, "\n  b", "\n b", 1), false},
	} {
		if got := checkReplay(t, []byte(base), []byte(tt.next), names); got != tt.hit {
			t.Errorf("replay of %q: %v, want %v", tt.next, got, tt.hit)
		}
	}
}

// TestReplayFixtures replays each fixture on itself and on its values changed.
func TestReplayFixtures(t *testing.T) {
	for _, file := range testkit.Fixtures(t, "*.prom") {
		page, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		names := allNames(page)
		moved := moveValues(page, func(v float64) string { return strconv.FormatFloat(v*3+1, 'g', -1, 64) })
		if bytes.Equal(moved, page) {
			t.Fatalf("%s: no value moved", file)
		}
		for _, next := range [][]byte{page, moved} {
			if !checkReplay(t, page, next, names) {
				t.Errorf("%s: a page of the same lines does not replay", file)
			}
		}
	}
}

// FuzzReplay remembers one page and replays another: whenever the replay succeeds, a full
// parse of the second page must succeed and emit the same values.
func FuzzReplay(f *testing.F) {
	page := testkit.ReadFixture(f, "vllm-0.10.0-glm45-issue-excerpt-a.prom")
	f.Add(page, moveValues(page, func(float64) string { return "1e3" }))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		checkReplay(t, a, b, allNames(a))
		checkReplay(t, a, b, NewNames(nil))
	})
}

// FuzzFastDecimal checks the fast decimal reading against strconv.ParseFloat, bit for bit, and
// that parseValue accepts and refuses what it did before the fast path.
func FuzzFastDecimal(f *testing.F) {
	for _, s := range []string{"0.0", "-0.0", "4.0", "1.7959985225434182e+09", "9007199254740993", "1e22", "1e23",
		"123456789012345678901", ".5", "5.", ".", "-", "+1", "1e", "1e+", "0e99999", "NaN", "+Inf", "-inf", "0x10", "1_0",
		"00000000000000000000001.5", "1.00000000000000000000", "4.9e-324", "1E5", "1e-22", "1.5e-23"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, wantErr := slowValue([]byte(s))
		if v, ok := fastDecimal([]byte(s)); ok {
			if wantErr != nil {
				t.Fatalf("%q: fast path reads %v, ParseFloat refuses it: %v", s, v, wantErr)
			}
			if math.Float64bits(v) != math.Float64bits(want) {
				t.Fatalf("%q: fast path %v (%x), ParseFloat %v (%x)", s, v, math.Float64bits(v), want, math.Float64bits(want))
			}
		}
		got, err := parseValue([]byte(s))
		if (err == nil) != (wantErr == nil) || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%q: parseValue %v, %v; want %v, %v", s, got, err, want, wantErr)
		}
	})
}

// BenchmarkReplay replays the largest fixture on itself, asking for the vLLM samples.
func BenchmarkReplay(b *testing.B) {
	page := testkit.ReadFixture(b, "prometheus-client-render-vllm-0.10.prom")
	var vl []string
	for _, n := range allNames(page).names {
		if strings.HasPrefix(n, "vllm:") {
			vl = append(vl, n)
		}
	}
	var sh Shape
	if err := sh.Parse(page, NewNames(vl), func(*Sample) {}); err != nil {
		b.Fatal(err)
	}
	vals := make([]float64, sh.Wanted())
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if !sh.Replay(page, vals) {
			b.Fatal("no replay")
		}
	}
}

// TestShapesShareCode checks that Shapes of pages with the same lines share one copy of their
// code, that one of other lines has its own, and that each still replays its own pages.
func TestShapesShareCode(t *testing.T) {
	a := []byte("# TYPE a_total counter\na_total{engine=\"0\"} 1\nb{engine=\"0\"} 2\n")
	a2 := []byte("# TYPE a_total counter\na_total{engine=\"0\"} 7\nb{engine=\"0\"} 8\n")
	other := []byte("# TYPE a_total counter\na_total{engine=\"1\"} 1\nb{engine=\"1\"} 2\n")
	names := allNames(a)
	var shapes [3]Shape
	for i, p := range [][]byte{a, a2, other} {
		if err := shapes[i].Parse(p, names, func(*Sample) {}); err != nil {
			t.Fatal(err)
		}
	}
	data := func(sh *Shape) *byte { return unsafe.SliceData(sh.code) }
	if data(&shapes[0]) != data(&shapes[1]) {
		t.Error("two Shapes of the same lines keep two copies of their code")
	}
	if data(&shapes[0]) == data(&shapes[2]) {
		t.Error("Shapes of different lines share code")
	}
	for i, p := range [][]byte{a2, a, other} {
		vals := make([]float64, shapes[i].Wanted())
		if !shapes[i].Replay(p, vals) {
			t.Errorf("shape %d does not replay its page's lines", i)
		}
	}
}
