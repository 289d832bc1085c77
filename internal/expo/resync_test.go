package expo

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/vllmstat/vllmstat/internal/testkit"
)

// described is one emitted sample spelt out, its value bit for bit.
type described struct{ id, value string }

func describe(s *Sample) described {
	return described{fmt.Sprintf("%d %s %q", s.ID, s.Name, s.Labels), fmt.Sprintf("%x line %d", math.Float64bits(s.Value), s.Line)}
}

// parseAll is Parse, its samples spelt out.
func parseAll(page []byte, names *Names) ([]described, error) {
	var out []described
	err := Parse(page, names, func(s *Sample) { out = append(out, describe(s)) })
	return out, err
}

// resyncAll resyncs page on sh, whose remembered page emitted prev, and spells out the samples
// as Parse would give them: a sample reported the same as a remembered one takes its name and
// labels from prev.
func resyncAll(t *testing.T, sh *Shape, page []byte, names *Names, prev []described) ([]described, error) {
	var out []described
	err := sh.Resync(page, names, func(k int, v float64, line int) {
		if k < 0 || k >= len(prev) {
			t.Fatalf("same as remembered sample %d of %d", k, len(prev))
		}
		out = append(out, described{prev[k].id, fmt.Sprintf("%x line %d", math.Float64bits(v), line)})
	}, func(s *Sample) { out = append(out, describe(s)) })
	return out, err
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkResync remembers pages[0], then resyncs each next page on the one before and compares
// with a full parse: same samples, values bit for bit, same error. After a page that fails,
// the next is parsed in full (as a caller does), and replaying a page that resynced gives the
// full parse's values.
func checkResync(t *testing.T, names *Names, pages ...[]byte) {
	t.Helper()
	var sh Shape
	var prev []described
	ok := false
	for i, page := range pages {
		want, wantErr := parseAll(page, names)
		var got []described
		var err error
		if ok {
			got, err = resyncAll(t, &sh, page, names, prev)
		} else {
			err = sh.Parse(page, names, func(s *Sample) { got = append(got, describe(s)) })
		}
		if errString(err) != errString(wantErr) {
			t.Fatalf("page %d: error %q, Parse says %q\npage: %q", i, errString(err), errString(wantErr), page)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("page %d: resync gives\n%v\nParse gives\n%v\npage: %q", i, got, want, page)
		}
		if ok = err == nil; !ok {
			continue
		}
		if sh.Wanted() != len(want) {
			t.Fatalf("page %d: shape remembers %d samples, Parse emits %d", i, sh.Wanted(), len(want))
		}
		vals := make([]float64, sh.Wanted())
		if !sh.Replay(page, vals) {
			t.Fatalf("page %d: the page just read does not replay\npage: %q", i, page)
		}
		for k, w := range want {
			if v := fmt.Sprintf("%x", math.Float64bits(vals[k])); !bytes.HasPrefix([]byte(w.value), []byte(v+" ")) {
				t.Fatalf("page %d: replay value %d is %s, Parse gives %s", i, k, v, w.value)
			}
		}
		prev = want
	}
}

// edits returns pages near base: lines inserted, dropped, swapped and changed at several
// places, comments and samples, wanted or not, and lines that break the page.
func edits(base []byte) [][]byte {
	lines := bytes.SplitAfter(base, []byte("\n"))
	n := len(lines)
	at := []int{0, 1, n / 3, n / 2, n - 2, n - 1}
	var out [][]byte
	do := func(f func(ls [][]byte, i int) [][]byte) {
		for _, i := range at {
			if i < 0 || i >= n {
				continue
			}
			ls := append([][]byte(nil), lines...)
			out = append(out, bytes.Join(f(ls, i), nil))
		}
	}
	do(func(ls [][]byte, i int) [][]byte { return append(ls[:i], ls[i+1:]...) })
	do(func(ls [][]byte, i int) [][]byte { return append(ls[:i], ls[min(i+20, len(ls)):]...) })
	do(func(ls [][]byte, i int) [][]byte {
		return append(ls[:i:i], append([][]byte{[]byte("new_series{a=\"b\"} 3\n"), []byte("# a comment\n")}, ls[i:]...)...)
	})
	do(func(ls [][]byte, i int) [][]byte {
		if i+1 < len(ls) {
			ls[i], ls[i+1] = ls[i+1], ls[i]
		}
		return ls
	})
	do(func(ls [][]byte, i int) [][]byte { // a copy of a line further on
		return append(ls[:i:i], append([][]byte{ls[(i+7)%len(ls)]}, ls[i:]...)...)
	})
	do(func(ls [][]byte, i int) [][]byte {
		ls[i] = bytes.Replace(ls[i], []byte(`="`), []byte(`="x`), 1)
		return ls
	})
	do(func(ls [][]byte, i int) [][]byte {
		ls[i] = bytes.Replace(ls[i], []byte(`{`), []byte(`{z="1",`), 1)
		return ls
	})
	do(func(ls [][]byte, i int) [][]byte {
		ls[i] = bytes.Replace(ls[i], []byte(`="`), []byte("=\"\xff"), 1)
		return ls
	})
	do(func(ls [][]byte, i int) [][]byte { ls[i] = append([]byte("# HELP x \xff\n"), ls[i]...); return ls })
	do(func(ls [][]byte, i int) [][]byte { ls[i] = append([]byte("x{a=\"\xff\"} 1\n"), ls[i]...); return ls })
	do(func(ls [][]byte, i int) [][]byte {
		ls[i] = bytes.Replace(ls[i], []byte("} "), []byte("}  "), 1)
		return ls
	})
	do(func(ls [][]byte, i int) [][]byte {
		ls[i] = bytes.Replace(ls[i], []byte("\n"), []byte(" x\n"), 1)
		return ls
	})
	do(func(ls [][]byte, i int) [][]byte {
		ls[i] = bytes.Replace(ls[i], []byte("\n"), []byte(" 17\n"), 1)
		return ls
	})
	do(func(ls [][]byte, i int) [][]byte {
		ls[i] = bytes.Replace(ls[i], []byte("{"), []byte("{a=\"1\",a=\"2\","), 1)
		return ls
	})
	return out
}

// TestResyncEdits resyncs each fixture's edits, from the fixture and back, with every name
// asked for and none.
func TestResyncEdits(t *testing.T) {
	for _, f := range testkit.Fixtures(t, "*.prom") {
		base, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		moved := moveValues(base, func(v float64) string { return fmt.Sprint(v*3 + 1) })
		for _, names := range []*Names{allNames(base), NewNames(nil)} {
			for k, e := range edits(base) {
				t.Run(fmt.Sprintf("%s/%d", f, k), func(t *testing.T) {
					checkResync(t, names, base, e, moved, e, e, base)
				})
			}
		}
	}
}

// FuzzResync remembers one page and resyncs two more on it in turn, each checked against a
// full parse.
func FuzzResync(f *testing.F) {
	page := testkit.ReadFixture(f, "vllm-0.10.0-glm45-issue-excerpt-a.prom")
	for k, e := range edits(page) {
		if k%4 == 0 {
			f.Add(page, e, page)
		}
	}
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		checkResync(t, allNames(a), a, b, c, a)
		checkResync(t, NewNames(nil), a, b, c)
	})
}

// TestResyncFindsItsPlace checks that after a block of lines is dropped or moved, Resync finds
// the remembered lines again and parses only a few lines around each gap.
func TestResyncFindsItsPlace(t *testing.T) {
	base := testkit.ReadFixture(t, "prometheus-client-render-vllm-0.10.prom")
	lines := bytes.SplitAfter(base, []byte("\n"))
	mid := len(lines) / 2
	join := func(parts ...[][]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, bytes.Join(p, nil)...)
		}
		return out
	}
	for name, tt := range map[string]struct {
		page []byte
		most int
	}{
		"100 lines dropped":         {join(lines[:mid], lines[mid+100:]), resyncLost},
		"60 lines moved to the end": {join(lines[:mid], lines[mid+60:], lines[mid:mid+60]), 2 * resyncLost},
		"a line inserted":           {join(lines[:mid], [][]byte{[]byte("x 1\n")}, lines[mid:]), 1},
		"50 lines inserted":         {join(lines[:mid], bytes.SplitAfter(bytes.Repeat([]byte("x 1\n"), 50), []byte("\n")), lines[mid:]), 50},
	} {
		t.Run(name, func(t *testing.T) {
			names := allNames(base)
			checkResync(t, names, base, tt.page)
			var sh Shape
			if err := sh.Parse(base, names, func(*Sample) {}); err != nil {
				t.Fatal(err)
			}
			if err := sh.Resync(tt.page, names, func(int, float64, int) {}, func(*Sample) {}); err != nil {
				t.Fatal(err)
			}
			if sh.parsed > tt.most {
				t.Errorf("%d lines parsed, want at most %d", sh.parsed, tt.most)
			}
		})
	}
}
