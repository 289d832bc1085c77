package expo

import (
	"bytes"
	"unicode/utf8"
)

// Shape remembers the lines of the last page Parse read without error, so that the next page of
// the same target, which nearly always has the same lines with other values, can be read by
// comparing bytes instead of parsing them (see Replay). It keeps copies of the lines, never
// the page. A Shape is owned by one goroutine.
type Shape struct {
	arena  []byte
	segs   []seg
	wanted int  // samples emitted
	valid  bool // the last Parse succeeded
	want   bool // set by the parser for the line just parsed
}

// seg is one line of the remembered page, as parser.run splits the page.
type seg struct {
	off, end int32 // the line in arena; for a sample line, only its part before the value
	sample   bool
	want     bool // a sample line whose name was asked for
}

// Parse is the package's Parse that also remembers the page's lines, for Replay.
func (sh *Shape) Parse(page []byte, names *Names, emit func(*Sample)) error {
	sh.arena, sh.segs, sh.wanted, sh.valid = sh.arena[:0], sh.segs[:0], 0, false
	p := parser{rec: sh, names: names, emit: emit, badUTF8: !utf8.Valid(page)}
	if err := p.run(page); err != nil {
		sh.arena, sh.segs = sh.arena[:0], sh.segs[:0]
		return err
	}
	sh.valid = true
	return nil
}

// add remembers a line that parsed; at is where its value starts, -1 for other lines.
func (sh *Shape) add(l []byte, at int) {
	s := seg{off: int32(len(sh.arena))}
	if at >= 0 {
		l = l[:at]
		s.sample, s.want = true, sh.want
		if s.want {
			sh.wanted++
		}
	}
	sh.arena = append(sh.arena, l...)
	s.end = int32(len(sh.arena))
	sh.segs = append(sh.segs, s)
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
func (sh *Shape) Replay(page []byte, vals []float64) bool {
	if !sh.valid || len(vals) < sh.wanted {
		return false
	}
	a := sh.arena
	pos, n := 0, 0
	for _, s := range sh.segs {
		if pos >= len(page) {
			return false
		}
		pre := a[s.off:s.end]
		if len(page)-pos < len(pre) || string(page[pos:pos+len(pre)]) != string(pre) {
			return false
		}
		pos += len(pre)
		if s.sample {
			start := pos
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
			if s.want {
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
