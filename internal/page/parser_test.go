package page

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/vllmstat/vllmstat/internal/benchpage"
)

// show prints a page with every value spelt out (NaN and -0 included), without its owner.
func show(pg *Page) string {
	if pg == nil {
		return "<nil>"
	}
	c := *pg
	c.owner = nil
	return fmt.Sprintf("%+v", c)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// sequence feeds pages to one Parser and checks each result against ParsePageOptions of the
// same page. release says, per page, whether to release it before the next parse; a page not
// released must not change under later parses (it is checked after the last one).
func sequence(t testing.TB, opt Options, pages [][]byte, release func(i int) bool) *Parser {
	p := NewParser(opt)
	type kept struct {
		pg   *Page
		text string
		i    int
	}
	var held []kept
	for i, body := range pages {
		want, wantErr := ParsePageOptions(body, opt)
		// The parser must not keep body: scribble over it once parsed.
		buf := bytes.Clone(body)
		got, err := p.Parse(buf)
		for j := range buf {
			buf[j] = '#'
		}
		if errText(err) != errText(wantErr) {
			t.Fatalf("page %d: error %q, ParsePageOptions says %q\npage: %q", i, errText(err), errText(wantErr), body)
		}
		if show(got) != show(want) {
			t.Fatalf("page %d: Parser gives\n%s\nParsePageOptions gives\n%s\npage: %q", i, show(got), show(want), body)
		}
		if got == nil {
			continue
		}
		if release(i) {
			got.Release()
		} else {
			held = append(held, kept{got, show(got), i})
		}
	}
	for _, h := range held {
		if s := show(h.pg); s != h.text {
			t.Fatalf("page %d, never released, changed under later parses:\n%s\nwas\n%s", h.i, s, h.text)
		}
	}
	return p
}

var releaseModes = map[string]func(int) bool{
	"always": func(int) bool { return true },
	"never":  func(int) bool { return false },
	"odd":    func(i int) bool { return i%2 == 1 },
	"thirds": func(i int) bool { return i%3 != 0 },
}

// mutations are pages near a base page: each either keeps its lines (and should be read by
// replay) or changes them in one of the ways that must send the Parser back to a full parse.
func mutations(base []byte) [][]byte {
	lines := bytes.SplitAfter(base, []byte("\n"))
	var out [][]byte
	edit := func(f func(i int, l []byte) []byte) {
		// the first sample line of a family vllmstat reads, and the first of one it does not
		for _, vllm := range []bool{true, false} {
			for i, l := range lines {
				if len(l) == 0 || l[0] == '#' || bytes.Contains(l, []byte("vllm")) != vllm {
					continue
				}
				ls := make([][]byte, len(lines))
				copy(ls, lines)
				ls[i] = f(i, l)
				out = append(out, bytes.Join(ls, nil))
				break
			}
		}
	}
	setValue := func(v string) func(int, []byte) []byte {
		return func(_ int, l []byte) []byte {
			j := bytes.LastIndexAny(l, " \t")
			return append(append(bytes.Clone(l[:j+1]), v...), '\n')
		}
	}
	for _, v := range []string{"NaN", "+Inf", "-Inf", "-0.0", "1e400", "abc", "", "1_0", "0x1p1", "7 1700000000000", "7 # {a=\"b\"} 1", "7 x"} {
		edit(setValue(v))
	}
	edit(func(_ int, l []byte) []byte { return nil })                          // a line less
	edit(func(_ int, l []byte) []byte { return append(bytes.Clone(l), l...) }) // a line twice
	edit(func(_ int, l []byte) []byte { return append([]byte(" "), l...) })    // indented
	edit(func(_ int, l []byte) []byte { return bytes.Replace(l, []byte("} "), []byte("}  "), 1) })
	edit(func(_ int, l []byte) []byte { return bytes.Replace(l, []byte(`="`), []byte(`="x`), 1) })
	edit(func(_ int, l []byte) []byte { return bytes.Replace(l, []byte(`="`), []byte("=\"\xff"), 1) })
	edit(func(_ int, l []byte) []byte { return bytes.Replace(l, []byte("\n"), []byte("\r\n"), 1) })
	edit(func(_ int, l []byte) []byte { return append([]byte("# HELP x \xff\n"), l...) })
	edit(func(_ int, l []byte) []byte { return append([]byte("# HELP x changed\n"), l...) })
	out = append(out, append(bytes.Clone(base), "\n"...), bytes.TrimSuffix(base, []byte("\n")), base[:len(base)/2])
	return out
}

// pageSequence is a base page, its successors, mutations of it, and back.
func pageSequence(base []byte) [][]byte {
	seq := [][]byte{base, benchpage.Variant(base, 1), benchpage.Variant(base, 2)}
	for k, m := range mutations(base) {
		seq = append(seq, m, benchpage.Variant(base, 3+k))
	}
	return append(seq, base, base)
}

// TestParserMatchesParsePage runs sequences of pages of each fixture through one Parser.
func TestParserMatchesParsePage(t *testing.T) {
	files := []string{"prometheus-client-render-vllm-0.10.prom", "prometheus-client-render-vllm-0.20.prom",
		"prometheus-client-render-vllm-0.8.prom", "llm-d-inference-sim-dp1.prom", "ray-serve-llm-two-replicas.prom",
		"ray-counters-without-total.prom", "vllm-0.10.0-glm45-issue-excerpt-a.prom"}
	for _, f := range files {
		base := readPage(t, f)
		seq := pageSequence(base)
		for mode, rel := range releaseModes {
			t.Run(f+"/"+mode, func(t *testing.T) { sequence(t, Options{}, seq, rel) })
		}
		for name, opt := range map[string]Options{"no worker labels": {WorkerLabels: []string{}},
			"limits": {Limits: Limits{MaxSeries: 50, MaxWorkers: 1}}} {
			t.Run(f+"/"+name, func(t *testing.T) { sequence(t, opt, seq, releaseModes["odd"]) })
		}
	}
	t.Run("ray-256KB", func(t *testing.T) { sequence(t, Options{}, pageSequence(benchpage.Ray(256<<10)), releaseModes["odd"]) })
}

// TestParserReplays checks that a page of the same lines is read by replay and reuses the
// released page, and that a page that is not released is not reused.
func TestParserReplays(t *testing.T) {
	base := readPage(t, "prometheus-client-render-vllm-0.10.prom")
	p := NewParser(Options{})
	first, err := p.Parse(base)
	if err != nil || p.prog == nil {
		t.Fatalf("first parse: %v, program %v", err, p.prog)
	}
	first.Release()
	second, err := p.Parse(benchpage.Variant(base, 1))
	if err != nil || second != first {
		t.Fatalf("a released page of the same structure was not filled again (err %v)", err)
	}
	third, err := p.Parse(benchpage.Variant(base, 2))
	if err != nil || third == second {
		t.Fatalf("a page not released was filled again (err %v)", err)
	}
	if show(second) == show(third) {
		t.Fatalf("two scrapes of other values gave the same page")
	}
	if allocs := testing.AllocsPerRun(20, func() {
		pg, err := p.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		pg.Release()
	}); allocs != 0 {
		t.Errorf("steady state: %v allocations per parse, want 0", allocs)
	}
}

// TestParserReleasesConcurrently reads and releases pages on another goroutine, as the
// collector does, under the race detector.
func TestParserReleasesConcurrently(t *testing.T) {
	base := readPage(t, "ray-serve-llm-two-replicas.prom")
	p := NewParser(Options{})
	pages := make(chan *Page)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for pg := range pages {
			var sum float64
			for _, ep := range pg.Engines {
				for _, cs := range ep.Counters {
					sum += cs.Value
				}
			}
			_ = sum
			pg.Release()
		}
	}()
	for k := range 200 {
		body := benchpage.Variant(base, k)
		want, _ := ParsePage(body)
		pg, err := p.Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		if show(pg) != show(want) {
			t.Fatalf("scrape %d differs from ParsePage", k)
		}
		pages <- pg
	}
	close(pages)
	wg.Wait()
}

// FuzzParserSequence parses a, b, a, b, b with one Parser, releasing some pages, and checks
// each result against ParsePageOptions. The seeds in testdata/fuzz/FuzzParserSequence are
// small pages and their successors; whole fixtures are added here.
func FuzzParserSequence(f *testing.F) {
	for _, name := range []string{"prometheus-client-render-vllm-0.10.prom", "ray-serve-llm-two-replicas.prom"} {
		b := readPage(f, name)
		f.Add(b, benchpage.Variant(b, 1), uint8(5))
	}
	f.Fuzz(func(t *testing.T, a, b []byte, mode uint8) {
		opt := Options{}
		if mode&8 != 0 {
			opt.WorkerLabels = []string{}
		}
		sequence(t, opt, [][]byte{a, b, a, b, b}, func(i int) bool { return mode>>(i%3)&1 != 0 })
	})
}

// lineEdits are pages whose lines are base's with a few inserted, dropped, moved or changed in
// the middle of the page: the pages a Parser reads by resyncing its previous page's lines.
func lineEdits(base []byte) [][]byte {
	lines := bytes.SplitAfter(base, []byte("\n"))
	var wanted []int // sample lines of families vllmstat reads
	for i, l := range lines {
		if len(l) > 0 && l[0] != '#' && bytes.Contains(l, []byte("vllm")) {
			wanted = append(wanted, i)
		}
	}
	if len(wanted) == 0 {
		return nil
	}
	mid := wanted[len(wanted)/2]
	var out [][]byte
	edit := func(f func(ls [][]byte) [][]byte) {
		out = append(out, bytes.Join(f(append([][]byte(nil), lines...)), nil))
	}
	insert := func(ls [][]byte, i int, l ...[]byte) [][]byte {
		return append(ls[:i:i], append(l, ls[i:]...)...)
	}
	drop := func(ls [][]byte, keep func(l []byte) bool) [][]byte {
		var kept [][]byte
		for _, l := range ls {
			if keep(l) {
				kept = append(kept, l)
			}
		}
		return kept
	}
	edit(func(ls [][]byte) [][]byte { return append(ls[:mid], ls[mid+1:]...) })                      // a wanted line less
	edit(func(ls [][]byte) [][]byte { return insert(ls, mid, []byte("other_metric{a=\"b\"} 1\n")) }) // a line more
	edit(func(ls [][]byte) [][]byte { return insert(ls, mid, []byte("# HELP other_metric text\n")) })
	edit(func(ls [][]byte) [][]byte { ls[mid], ls[mid+1] = ls[mid+1], ls[mid]; return ls }) // two lines swapped
	edit(func(ls [][]byte) [][]byte {                                                       // a block of lines moved to the end
		end := min(mid+30, len(ls))
		block := append([][]byte(nil), ls[mid:end]...)
		return append(append(ls[:mid:mid], ls[end:]...), block...)
	})
	edit(func(ls [][]byte) [][]byte { // many lines dropped at once
		return append(ls[:mid:mid], ls[min(mid+40, len(ls)):]...)
	})
	for _, w := range []string{`engine="`, `ReplicaId="`, `model_name="`} {
		edit(func(ls [][]byte) [][]byte { // a wanted line of a new worker (or series)
			return insert(ls, mid, bytes.Replace(ls[mid], []byte(w), []byte(w+"zz"), 1))
		})
		edit(func(ls [][]byte) [][]byte { // every line of one worker renamed
			for i, l := range ls {
				if bytes.Contains(l, []byte(w+"0")) || bytes.Contains(l, []byte(w+"k7")) {
					ls[i] = bytes.Replace(l, []byte(w), []byte(w+"n"), 1)
				}
			}
			return ls
		})
	}
	for _, w := range []string{`engine="0"`, `engine="1"`, `ReplicaId="k7qz2m1d"`} {
		edit(func(ls [][]byte) [][]byte { // a worker gone
			return drop(ls, func(l []byte) bool { return !bytes.Contains(l, []byte(w)) })
		})
	}
	fam := lines[mid][:bytes.IndexAny(lines[mid], "{ ")]
	edit(func(ls [][]byte) [][]byte { // a new label on one line, then on a whole family
		ls[mid] = bytes.Replace(ls[mid], []byte("{"), []byte(`{extra="1",`), 1)
		return ls
	})
	edit(func(ls [][]byte) [][]byte {
		for i, l := range ls {
			if bytes.HasPrefix(l, fam) && bytes.HasPrefix(l[len(fam):], []byte("{")) {
				ls[i] = bytes.Replace(l, []byte("{"), []byte(`{extra="1",`), 1)
			}
		}
		return ls
	})
	edit(func(ls [][]byte) [][]byte {
		return drop(ls, func(l []byte) bool { return !bytes.Contains(l, []byte(`le="+Inf"`)) })
	})
	edit(func(ls [][]byte) [][]byte { // a gauge turned NaN next to a new line
		ls = insert(ls, mid, []byte("other_metric 2\n"))
		for i, l := range ls {
			if bytes.Contains(l, []byte("num_requests_running")) && l[0] != '#' {
				ls[i] = append(l[:bytes.LastIndexByte(l, ' ')+1:bytes.LastIndexByte(l, ' ')+1], "NaN\n"...)
				break
			}
		}
		return ls
	})
	edit(func(ls [][]byte) [][]byte { // a bad line in the middle
		return insert(ls, mid, bytes.Replace(ls[mid], []byte("{"), []byte(`{x="\q",`), 1))
	})
	edit(func(ls [][]byte) [][]byte { return insert(ls, mid, []byte("x{a=\"\xff\"} 1\n")) })
	edit(func(ls [][]byte) [][]byte { return insert(ls, mid, []byte("# TYPE x \xff\n")) })
	edit(func(ls [][]byte) [][]byte { // a bucket whose le is not a number
		for i, l := range ls {
			if j := bytes.Index(l, []byte(`le="`)); j > 0 && i > mid {
				ls[i] = bytes.Replace(l, []byte(`le="`), []byte(`le="z`), 1)
				break
			}
		}
		return ls
	})
	return out
}

// editSequence is base, then each line edit followed by a scrape of base with other values, so
// that every page but the first differs in a few lines from the page before.
func editSequence(base []byte) [][]byte {
	seq := [][]byte{base}
	for k, e := range lineEdits(base) {
		seq = append(seq, e, benchpage.Variant(e, 1), benchpage.Variant(base, 2+k))
	}
	return seq
}

// TestParserLineEdits runs pages with lines inserted, dropped, moved and changed through one
// Parser, checking each against ParsePageOptions, with limits that some pages go over.
func TestParserLineEdits(t *testing.T) {
	files := []string{"prometheus-client-render-vllm-0.10.prom", "prometheus-client-render-vllm-0.8.prom",
		"llm-d-inference-sim-dp1.prom", "ray-serve-llm-two-replicas.prom", "vllm-0.10.0-glm45-issue-excerpt-a.prom"}
	for _, f := range files {
		base := readPage(t, f)
		seq := editSequence(base)
		// Limits that base just fits: a page with one series or worker more is over them.
		raws, _, workers, err := collect(base, Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		opts := map[string]Options{"default": {}, "no worker labels": {WorkerLabels: []string{}},
			"series limit": {Limits: Limits{MaxSeries: len(raws)}}, "worker limit": {Limits: Limits{MaxWorkers: len(workers)}}}
		for name, opt := range opts {
			t.Run(f+"/"+name, func(t *testing.T) { sequence(t, opt, seq, releaseModes["odd"]) })
		}
	}
	t.Run("ray-256KB", func(t *testing.T) {
		sequence(t, Options{}, editSequence(benchpage.Ray(256<<10)), releaseModes["thirds"])
	})
}

// TestParserLinesGiveRaws runs the line edits of TestParserLineEdits with no raws kept between
// pages, so that every partial read gets the previous page's raws from its lines.
func TestParserLinesGiveRaws(t *testing.T) {
	defer func(m int) { keptMax = m }(keptMax)
	keptMax = 0
	for _, f := range []string{"prometheus-client-render-vllm-0.10.prom", "ray-serve-llm-two-replicas.prom"} {
		seq := editSequence(readPage(t, f))
		for _, opt := range []Options{{}, {WorkerLabels: []string{}}} {
			p := sequence(t, opt, seq, releaseModes["odd"])
			if p.partials == 0 || p.kept != nil {
				t.Fatalf("%s: %d partial reads, raws kept %v", f, p.partials, p.kept != nil)
			}
		}
	}
}

// TestParserResyncs checks that a page with a few lines changed is read by resyncing, and that
// the page after it replays.
func TestParserResyncs(t *testing.T) {
	base := readPage(t, "prometheus-client-render-vllm-0.10.prom")
	p := NewParser(Options{})
	edits := lineEdits(base)
	for _, body := range [][]byte{base, edits[0], edits[1], edits[6]} {
		if _, err := p.Parse(body); err != nil {
			t.Fatal(err)
		}
	}
	if p.partials != 3 {
		t.Fatalf("%d of 3 edited pages were read by resyncing", p.partials)
	}
	if _, err := p.Parse(benchpage.Variant(edits[6], 1)); err != nil || p.partials != 3 || p.prog == nil {
		t.Fatalf("the page after a resync did not replay (err %v)", err)
	}
}

// TestParsersRunConcurrently runs the parsers of several targets at once, as the scrape goroutines
// do: the buffers parsers share while a page is read (expo's pools of scratch code and of
// decoded lines) must never be written by two of them at a time (run with -race), nor leave
// one parser with another's lines.
func TestParsersRunConcurrently(t *testing.T) {
	base := readPage(t, "prometheus-client-render-vllm-0.20.prom")
	seq := append(pageSequence(base), lineEdits(base)...)
	for i := range 6 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			sequence(t, Options{}, seq, releaseModes["odd"])
		})
	}
}

// TestParsersShareStructures checks that Parsers of pages of the same lines share one program
// and one copy of kept raws, whatever their values, and that a page of other lines has its own.
func TestParsersShareStructures(t *testing.T) {
	base := readPage(t, "prometheus-client-render-vllm-0.20.prom")
	seq := pageSequence(base)
	a, b, c := NewParser(Options{}), NewParser(Options{}), NewParser(Options{})
	for _, step := range []struct {
		p    *Parser
		page []byte
	}{{a, seq[0]}, {b, seq[1]}, {c, readPage(t, "prometheus-client-render-vllm-0.10.prom")}} {
		if _, err := step.p.Parse(step.page); err != nil {
			t.Fatal(err)
		}
	}
	if a.prog == nil || a.kept == nil {
		t.Fatal("no program or kept raws learnt")
	}
	if a.prog != b.prog || a.kept != b.kept {
		t.Error("Parsers of pages of the same lines keep copies of their own")
	}
	if a.prog == c.prog || a.kept == c.kept {
		t.Error("Parsers of pages of other lines share a structure")
	}
	if a.tmpl != b.tmpl || a.tmpl == c.tmpl {
		t.Error("page templates: alike pages do not share one, or pages of other lines do")
	}
}

// TestParsersSharePages checks that a page one Parser's reader releases is filled by the next
// parse of another Parser of pages alike (no Parser keeps a page of its own between scrapes),
// and never by a Parser of pages that differ in anything fill does not write: here only the
// model's name, which leaves the program the same.
func TestParsersSharePages(t *testing.T) {
	base := readPage(t, "prometheus-client-render-vllm-0.20.prom")
	other := bytes.ReplaceAll(base, []byte(`model_name="`), []byte(`model_name="other-`))
	if bytes.Equal(other, base) {
		t.Fatal("the fixture names no model")
	}
	a, b, c := NewParser(Options{}), NewParser(Options{}), NewParser(Options{})
	parse := func(p *Parser, body []byte) *Page {
		t.Helper()
		pg, err := p.Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ParsePage(body)
		if show(pg) != show(want) {
			t.Fatal("a parse differs from ParsePage")
		}
		return pg
	}
	parse(b, benchpage.Variant(base, 1)).Release()
	parse(c, benchpage.Variant(other, 1)).Release()
	if b.prog != c.prog {
		t.Fatal("pages that differ in a label value only have different programs; the test needs them alike")
	}
	first := parse(a, base)
	first.Release()
	if got := parse(b, benchpage.Variant(base, 2)); got != first {
		t.Error("a page released by one Parser's reader was not filled by the next parse of a Parser of pages alike")
	}
	for k := range 3 {
		if got := parse(c, benchpage.Variant(other, k+2)); got == first {
			t.Fatal("a page was filled by a Parser of pages of another structure")
		}
	}
	// A page released twice is kept once: two parses never get the same page.
	pg := parse(a, benchpage.Variant(base, 3))
	pg.Release()
	pg.Release()
	x, y := parse(a, base), parse(b, base)
	if x == y {
		t.Error("a page released twice was handed to two parses")
	}
}
