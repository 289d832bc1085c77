package expo

import (
	"bytes"
	"unicode/utf8"
)

// resyncWindow is how many remembered lines past the cursor Resync compares a line with before
// parsing it: enough to step over the lines a scrape drops here and there (a task gone, a
// series no longer exported), few enough that a line that matches nothing costs little more
// than its parse.
const resyncWindow = 16

// Resync reads a page whose lines mostly equal the remembered page's, in any number of places
// not: it is Parse of page (same samples, same values, same error), except that a wanted sample
// whose line matches a remembered one up to its value is not decoded but reported to same with
// its place k among the remembered page's emitted samples (the k-th sample Parse emitted then,
// with the name and labels it had) and its value; every other wanted sample goes to emit as
// Parse gives it. Both are called in page order, with the line of the sample. names must be the
// set the remembered page was read with. On success the page's lines are remembered in place of
// the previous ones, for Replay or Resync of the next page; after an error (or a callback's
// panic) the previous page stays remembered.
//
// Lines are compared as Replay compares them (see there for why equal bytes give equal
// results) with a cursor in the remembered lines: a line is compared with the remembered line
// at the cursor, then with the next few, and the cursor moves past the one it matches, so lines
// inserted, dropped or changed make only themselves miss. A line that matches none is parsed
// as Parse parses it. Which remembered line a line matches does not change what it gives,
// since the bytes decide, only how fast lines are found.
//
// The page-wide UTF-8 flag of Parse is decided per line for the lines parsed: a line that is
// valid UTF-8 passes Parse's checks whatever the flag, and a page with a line that is not has
// the flag set, so checking a line when it is not valid UTF-8 gives what Parse gives. A matched
// line passed the checks on the remembered page or was valid UTF-8 (where the flag was clear),
// and its value, timestamp and exemplar are never checked for UTF-8.
func (sh *Shape) Resync(page []byte, names *Names, same func(k int, v float64, line int), emit func(*Sample)) error {
	if !sh.valid {
		return sh.Parse(page, names, emit)
	}
	if sh.next == nil {
		sh.next = &Shape{}
	}
	nx := sh.next
	nx.arena, nx.segs, nx.wanted, nx.valid = nx.arena[:0], nx.segs[:0], 0, false
	if cap(nx.arena) < len(page) {
		nx.arena = make([]byte, 0, len(page))
	}
	p := parser{rec: nx, names: names, emit: emit}
	segs := sh.segs
	cur, line := 0, 0
	for len(page) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(page, '\n'); i >= 0 {
			l, page = page[:i], page[i+1:]
		} else {
			l, page = page, nil
		}
		if j := sh.find(l, cur); j >= 0 {
			s := segs[j]
			pre := l[:s.end-s.off]
			if !s.sample {
				cur = j + 1
				nx.keep(pre, false, false)
				continue
			}
			rest := l[len(pre):]
			end := 0
			for end < len(rest) && !isBlank(rest[end]) {
				end++
			}
			// A bad value or tail is left to the line parser, for its error.
			if v, err := parseValue(rest[:end]); err == nil && checkTail(rest[end:]) == nil {
				cur = j + 1
				if s.want {
					same(int(s.idx), v, line)
				}
				nx.keep(pre, true, s.want)
				continue
			}
		}
		p.badUTF8 = !utf8.Valid(l)
		at, err := p.line(l, line)
		if err != nil {
			nx.arena, nx.segs = nx.arena[:0], nx.segs[:0]
			return err
		}
		nx.add(l, at)
	}
	// The page's lines become the remembered ones; the previous ones' storage is kept for the
	// next Resync to write into.
	old := *sh
	*sh = *nx
	*nx = old
	nx.next, sh.next = nil, nx
	sh.valid = true
	return nil
}

// find returns the remembered line, from cur on, that l matches up to its value, or -1.
func (sh *Shape) find(l []byte, cur int) int {
	a := sh.arena
	for j := cur; j < len(sh.segs) && j < cur+resyncWindow; j++ {
		s := sh.segs[j]
		pre := a[s.off:s.end]
		if s.sample {
			if len(l) > len(pre) && !isBlank(l[len(pre)]) && string(l[:len(pre)]) == string(pre) {
				return j
			}
		} else if string(l) == string(pre) {
			return j
		}
	}
	return -1
}

// keep remembers a line that matched a remembered one: pre is the line, or a sample line's
// part before its value.
func (sh *Shape) keep(pre []byte, sample, want bool) {
	s := seg{off: int32(len(sh.arena)), sample: sample, want: want}
	if want {
		s.idx = int32(sh.wanted)
		sh.wanted++
	}
	sh.arena = append(sh.arena, pre...)
	s.end = int32(len(sh.arena))
	sh.segs = append(sh.segs, s)
}
