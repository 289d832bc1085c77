package expo

import (
	"bytes"
	"encoding/binary"
	"sync"
	"unicode/utf8"
	"unique"
	"unsafe"
)

// Shape remembers the lines of the last page Parse read without error, so that the next page of
// the same target, which nearly always has the same lines with other values, can be read by
// comparing bytes instead of parsing them (see Replay). It keeps copies of the lines, never
// the page. A Shape is owned by one goroutine.
//
// A target is remembered for as long as it is scraped, and a fleet has many: the lines are
// kept front and back coded (see add), which a page's run of lines of one family, differing in
// a label value or two, shrinks to a small part of its size.
type Shape struct {
	// code is the lines, as add codes them; once end has shared it with other Shapes of the
	// same lines (shared keeps it so), it is never written.
	code   []byte
	shared unique.Handle[string]
	lines  int
	wanted int  // samples emitted
	valid  bool // the last Parse succeeded
	want   bool // set by the parser for the line just parsed
	size   int  // bytes of the lines decoded
	prev   []byte
	buf    *[]byte // the scratch code is written in
	parsed int     // lines the last Resync parsed, for tests
}

// A line's code starts with a byte of flags. Then come the lengths of the bytes it shares with
// the line before at its start and at its end and of the bytes between, one byte each (or, with
// lineLong, as uvarints), then the bytes between.
const (
	lineSample = 1 << iota // a sample line: its bytes end where its value starts
	lineWant               // a sample line whose name was asked for
	lineNote               // a comment, kept as this flag alone (see comment)
	lineGlued              // a sample line whose value follows its name without a blank
	lineLong               // lengths over 255
)

// minShared is the fewest bytes shared with the line before that are coded as shared: fewer
// are copied, which costs less to compare than one more comparison.
const minShared = 8

// scratch holds buffers to write a page's code in before it is copied to storage of its size:
// a page is read by one goroutine at a time, and a process has few of them at once.
var scratch sync.Pool // of *[]byte

// begin readies sh to remember a page's lines.
func (sh *Shape) begin() {
	sh.lines, sh.wanted, sh.size, sh.valid, sh.prev = 0, 0, 0, false, nil
	sh.buf, _ = scratch.Get().(*[]byte)
	if sh.buf == nil {
		sh.buf = new([]byte)
	}
	sh.code = (*sh.buf)[:0]
}

// end ends the lines' remembering: when they are valid the code is copied to storage of its
// size, since it stays for as long as the target is scraped, and else dropped; the scratch it
// was written in goes back to the pool. It does nothing after the first call.
func (sh *Shape) end() {
	if sh.buf == nil {
		return
	}
	// The code is copied out before its scratch goes back to the pool, where another
	// goroutine's Parse may take it at once.
	code := sh.code
	if sh.valid {
		sh.shared = unique.Make(string(code))
		sh.code = readOnly(sh.shared.Value())
	} else {
		sh.code, sh.lines, sh.wanted, sh.size = nil, 0, 0, 0
	}
	*sh.buf = code[:0]
	scratch.Put(sh.buf)
	sh.buf, sh.prev = nil, nil
}

// readOnly returns s's bytes, which must never be written. A fleet's targets serve pages of
// the same lines (the same families, labels and model), so the Shapes of their pages share one
// copy of the code: a copy per target was a fifth of the memory of a thousand targets' parsers.
func readOnly(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// Parse is the package's Parse that also remembers the page's lines, for Replay.
func (sh *Shape) Parse(page []byte, names *Names, emit func(*Sample)) error {
	sh.begin()
	defer sh.end() // also when emit panics
	p := parser{rec: sh, names: names, emit: emit, badUTF8: !utf8.Valid(page)}
	if err := p.run(page); err != nil {
		return err
	}
	sh.valid = true
	return nil
}

// add remembers a line that parsed; at is where its value starts, -1 for other lines.
func (sh *Shape) add(l []byte, at int) {
	if at >= 0 {
		sh.keep(l[:at], true, sh.want)
	} else {
		sh.keep(l, false, false)
	}
}

// keep remembers a line, or a sample line's part before its value, l, which must stay
// unchanged until the next line is kept (a line of the page being read). A line is coded as
// the bytes it shares with the line before at its start and at its end, and the bytes between,
// which are all that is copied.
func (sh *Shape) keep(l []byte, sample, want bool) {
	if !sample && comment(l) {
		sh.code = append(sh.code, lineNote)
		sh.lines++
		return
	}
	prev := sh.prev
	n := min(len(l), len(prev))
	pre := 0 // a word at a time, then a byte
	for pre+8 <= n && binary.LittleEndian.Uint64(l[pre:]) == binary.LittleEndian.Uint64(prev[pre:]) {
		pre += 8
	}
	for pre < n && l[pre] == prev[pre] {
		pre++
	}
	suf := 0
	for suf+8 <= n-pre && binary.LittleEndian.Uint64(l[len(l)-8-suf:]) == binary.LittleEndian.Uint64(prev[len(prev)-8-suf:]) {
		suf += 8
	}
	for suf < n-pre && l[len(l)-1-suf] == prev[len(prev)-1-suf] {
		suf++
	}
	if pre < minShared {
		pre = 0
	}
	if suf < minShared {
		suf = 0
	}
	var flags byte
	if sample {
		flags |= lineSample
		if len(l) > 0 && isNameChar(l[len(l)-1]) {
			flags |= lineGlued
		}
	}
	if want {
		flags |= lineWant
		sh.wanted++
	}
	mid := l[pre : len(l)-suf]
	sh.size += len(l)
	if pre > 255 || suf > 255 || len(mid) > 255 {
		sh.code = append(sh.code, flags|lineLong)
		sh.code = binary.AppendUvarint(sh.code, uint64(pre))
		sh.code = binary.AppendUvarint(sh.code, uint64(suf))
		sh.code = binary.AppendUvarint(sh.code, uint64(len(mid)))
	} else {
		sh.code = append(sh.code, flags, byte(pre), byte(suf), byte(len(mid)))
	}
	sh.code = append(sh.code, mid...)
	sh.prev = l
	sh.lines++
}

// head decodes the code of a line at i: its flags and lengths, and where its bytes start.
func head(code []byte, i int) (flags byte, pre, suf, mid, at int) {
	flags = code[i]
	if flags&lineLong == 0 {
		if flags&lineNote != 0 {
			return flags, 0, 0, 0, i + 1
		}
		return flags, int(code[i+1]), int(code[i+2]), int(code[i+3]), i + 4
	}
	i++
	var v uint64
	var n int
	v, n = binary.Uvarint(code[i:])
	pre, i = int(v), i+n
	v, n = binary.Uvarint(code[i:])
	suf, i = int(v), i+n
	v, n = binary.Uvarint(code[i:])
	return flags, pre, suf, int(v), i + n
}

// comment reports whether l is a comment line. Parse reads nothing of a comment but, for a
// HELP or TYPE line, whether it is valid UTF-8 (see commentOK): a comment is remembered as one
// without its bytes, and matches any comment that passes that check.
func comment(l []byte) bool {
	l = trimLeft(l)
	return len(l) > 0 && l[0] == '#'
}

// commentOK reports whether Parse accepts comment line l whatever the page around it: a HELP
// or TYPE line must be valid UTF-8 when the page is not, and a page is not when l is not.
func commentOK(l []byte) bool {
	c := trimLeft(trimLeft(l)[1:])
	return !(keyword(c, help) || keyword(c, typ)) || utf8.Valid(c)
}

// note reads a line of page at pos, where a remembered comment is, and returns where the next
// line starts and whether the line is a comment Parse accepts.
func note(page []byte, pos int) (int, bool) {
	if pos >= len(page) {
		return pos, false
	}
	end := len(page)
	if j := bytes.IndexByte(page[pos:], '\n'); j >= 0 {
		end = pos + j
	}
	l := page[pos:end]
	// Nearly always the line starts with '#' and is ASCII, which Parse accepts whatever it
	// says: that is checked 8 bytes at a time.
	if len(l) > 0 && l[0] == '#' {
		var or uint64
		i := 0
		for ; i+8 <= len(l); i += 8 {
			or |= binary.LittleEndian.Uint64(l[i:])
		}
		for ; i < len(l); i++ {
			or |= uint64(l[i])
		}
		if or&0x8080808080808080 == 0 {
			return min(end+1, len(page)), true
		}
	}
	if len(l) == 0 || l[0] != '#' && !comment(l) || !commentOK(l) {
		return pos, false
	}
	return min(end+1, len(page)), true
}

// valueAfter reports whether c, after a remembered sample line's part before its value ending
// in last, starts the value as it did there. It does unless that part ends in the name, the
// value following it without a blank, and c goes on with the name, opens its label set or is
// a byte no name has.
func valueAfter(last, c byte) bool {
	return !isNameChar(last) || !(isNameChar(c) || c == '{' || c >= utf8.RuneSelf)
}

// Wanted returns how many samples the remembered page emitted: the length Replay fills.
func (sh *Shape) Wanted() int { return sh.wanted }

// Replay reads page when it has exactly the remembered page's lines up to their sample values
// (and timestamps and exemplars). It then reports true, with vals[i] set to the value of the
// i-th emitted sample of the remembered page, and Parse of page would have emitted the same
// samples with these values: it reports false when it cannot tell, and the caller parses page
// in full (which also reports any error).
//
// Why equal bytes give equal results: Parse reads a line from left to right, keeping nothing
// from one line to the next that changes what it accepts or emits, except one flag for the page
// as a whole (whether it is valid UTF-8), which only decides whether label values and HELP and
// TYPE lines are checked one by one; those lay in remembered lines, which passed the check or
// did not need it (a page that is valid UTF-8 has valid UTF-8 in every line). A remembered
// comment or blank line matches only a line equal to it. A remembered sample line's part before
// the value ends right after the blanks that follow its name and label set, so the same bytes
// followed by a byte that is not blank are read the same way, to the same name, labels and
// start of value; the value, timestamp and exemplar are then checked with the same functions
// Parse uses. Lines are split at '\n' as Parse splits them.
//
// A line's bytes shared with the line before are compared with that line's in page, which
// equal the remembered ones once that line matched.
func (sh *Shape) Replay(page []byte, vals []float64) bool {
	if !sh.valid || len(vals) < sh.wanted {
		return false
	}
	code := sh.code
	pos, n, i := 0, 0, 0
	prev, prevEnd := 0, 0 // the previous line's remembered part in page
	for range sh.lines {
		flags := code[i]
		var pre, suf, mid int
		switch {
		case flags&(lineNote|lineLong) == 0: // nearly every sample line, decoded here for speed
			pre, suf, mid = int(code[i+1]), int(code[i+2]), int(code[i+3])
			i += 4
		case flags == lineNote:
			i++
			end, ok := note(page, pos)
			if !ok {
				return false
			}
			pos = end
			continue
		default:
			flags, pre, suf, mid, i = head(code, i)
		}
		size := pre + mid + suf
		if pos >= len(page) || len(page)-pos < size {
			return false
		}
		if pre > 0 && string(page[pos:pos+pre]) != string(page[prev:prev+pre]) ||
			string(page[pos+pre:pos+pre+mid]) != string(code[i:i+mid]) ||
			suf > 0 && string(page[pos+pre+mid:pos+size]) != string(page[prevEnd-suf:prevEnd]) {
			return false
		}
		i += mid
		prev, pos = pos, pos+size
		prevEnd = pos
		if flags&lineSample != 0 {
			start := pos
			if flags&lineGlued != 0 && start < len(page) && !valueAfter(page[start-1], page[start]) {
				return false
			}
			for pos < len(page) && page[pos] != ' ' && page[pos] != '\t' && page[pos] != '\n' {
				pos++
			}
			if pos == start {
				return false
			}
			v, ok := fastDecimal(page[start:pos])
			if !ok {
				var err error
				if v, err = slowValue(page[start:pos]); err != nil {
					return false
				}
			}
			if pos < len(page) && page[pos] != '\n' {
				end := len(page)
				if i := bytes.IndexByte(page[pos:], '\n'); i >= 0 {
					end = pos + i
				}
				if checkTail(page[pos:end]) != nil {
					return false
				}
				pos = end
			}
			if flags&lineWant != 0 {
				vals[n] = v
				n++
			}
		}
		if pos < len(page) {
			if page[pos] != '\n' {
				return false
			}
			pos++
		}
	}
	return pos == len(page)
}

// decoded is the remembered lines decoded, for Resync to compare lines with any of them.
type decoded struct {
	arena []byte
	segs  []seg
	// index finds a remembered line by its hash (see Resync), built when first needed.
	index   map[uint64]int32
	indexed bool
}

// decodings holds decoded lines for Resync to reuse: resyncs are rare and brief, and a
// process has few at once, so they share their buffers rather than keep one per Shape.
var decodings sync.Pool // of *decoded

// seg is one line of the remembered page, as parser.run splits the page.
type seg struct {
	off, end int32 // the line in arena; for a sample line, only its part before the value
	idx      int32 // for a wanted sample line, its place among the samples emitted
	sample   bool
	want     bool // a sample line whose name was asked for
	note     bool // a comment, of which nothing is kept
}

// decode decodes the remembered lines.
func (sh *Shape) decode() *decoded {
	f, _ := decodings.Get().(*decoded)
	if f == nil {
		f = &decoded{}
	}
	f.arena, f.segs, f.indexed = f.arena[:0], f.segs[:0], false
	if cap(f.arena) < sh.size {
		f.arena = make([]byte, 0, sh.size)
	}
	if cap(f.segs) < sh.lines {
		f.segs = make([]seg, 0, sh.lines)
	}
	code := sh.code
	i, prev, wanted := 0, 0, 0
	for range sh.lines {
		var flags byte
		var pre, suf, mid int
		flags, pre, suf, mid, i = head(code, i)
		if flags == lineNote {
			f.segs = append(f.segs, seg{off: int32(len(f.arena)), end: int32(len(f.arena)), note: true})
			continue
		}
		s := seg{off: int32(len(f.arena)), sample: flags&lineSample != 0, want: flags&lineWant != 0}
		if s.want {
			s.idx = int32(wanted)
			wanted++
		}
		f.arena = append(f.arena, f.arena[prev:prev+pre]...)
		f.arena = append(f.arena, code[i:i+mid]...)
		f.arena = append(f.arena, f.arena[int(s.off)-suf:s.off]...)
		i += mid
		prev = int(s.off)
		s.end = int32(len(f.arena))
		f.segs = append(f.segs, s)
	}
	return f
}

// Samples emits the remembered page's wanted samples as Parse emitted them, but for their
// values, which are 0: what the page said besides its values, for a caller that did not keep
// it.
func (sh *Shape) Samples(names *Names, emit func(*Sample)) {
	if !sh.valid {
		return
	}
	p := parser{names: names, emit: emit}
	var prev, cur []byte
	i := 0
	for n := range sh.lines {
		flags, pre, suf, mid, at := head(sh.code, i)
		if flags == lineNote {
			i = at
			continue
		}
		cur = append(append(append(cur[:0], prev[:pre]...), sh.code[at:at+mid]...), prev[len(prev)-suf:]...)
		i = at + mid
		if flags&lineWant != 0 {
			l := append(cur, '0')
			p.badUTF8 = !utf8.Valid(l)
			if _, err := p.line(l, n+1); err != nil {
				panic("expo: a remembered line no longer parses: " + err.Error())
			}
		}
		prev, cur = cur, prev
	}
}
