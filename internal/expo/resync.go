package expo

import (
	"bytes"
	"hash/maphash"
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
// as Parse parses it; after a few such lines in a row (a block of lines dropped or moved), the
// parsed line's prefix is looked up in the whole remembered page and the cursor goes on from
// where it was. Which remembered line a line matches does not change what it gives, since the
// bytes decide, only how fast lines are found.
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
	old := sh.decode()
	defer decodings.Put(old)
	nx := &Shape{}
	nx.begin()
	defer nx.end() // after an error or a panic
	p := parser{rec: nx, names: names, emit: emit}
	segs := old.segs
	cur, line, misses, parsed := 0, 0, 0, 0
	for len(page) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(page, '\n'); i >= 0 {
			l, page = page[:i], page[i+1:]
		} else {
			l, page = page, nil
		}
		// After a few misses in a row the page may have little in common with the remembered
		// one: a line is then compared with the line at the cursor only (where lines resume
		// after a block inserted), and looked up once its prefix is known.
		window := resyncWindow
		if misses >= resyncLost {
			window = 1
		}
		if j := old.find(l, cur, window); j >= 0 {
			misses = 0
			s := segs[j]
			pre := l[:s.end-s.off]
			if !s.sample {
				cur = j + 1
				nx.keep(l, false, false)
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
			return err
		}
		nx.add(l, at)
		parsed++
		// Lines that miss in a row may be lines of the remembered page past a block dropped
		// or moved, further than find looks: the line's own prefix, now known, says where it
		// was, and the cursor goes on from there.
		// Looked up at the resyncLost-th miss in a row, then ever more rarely: a page with
		// little in common with the remembered one is then barely slower than a parse.
		if misses++; misses >= resyncLost && misses&(misses-1) == 0 {
			if j := old.locate(l, at); j >= 0 {
				cur, misses = j+1, 0
			}
		}
	}
	// The page's lines become the remembered ones.
	nx.valid = true
	nx.end()
	nx.parsed = parsed
	*sh = *nx
	return nil
}

// resyncLost is how many lines in a row may match nothing before Resync looks for the next one
// in the whole remembered page.
const resyncLost = 4

var seed = maphash.MakeSeed()

// lineKey hashes a remembered line, or a sample line's part before its value.
func lineKey(pre []byte, sample bool) uint64 {
	h := maphash.Bytes(seed, pre)
	if sample {
		h = ^h
	}
	return h
}

// locate returns the remembered line that l, which the parser read and found its value at at
// (-1 for a line without a value), equals up to its value, or -1. The index is built on first
// use; a prefix the remembered page has twice leads to its last line.
func (sh *decoded) locate(l []byte, at int) int {
	if !sh.indexed {
		if sh.index == nil {
			sh.index = make(map[uint64]int32, len(sh.segs))
		}
		clear(sh.index)
		sh.indexed = true
		for j, s := range sh.segs {
			sh.index[lineKey(sh.arena[s.off:s.end], s.sample)] = int32(j)
		}
	}
	pre := l
	if at >= 0 {
		pre = l[:at]
	}
	j, ok := sh.index[lineKey(pre, at >= 0)]
	if !ok {
		return -1
	}
	s := sh.segs[j]
	if s.sample != (at >= 0) || string(sh.arena[s.off:s.end]) != string(pre) {
		return -1
	}
	return int(j)
}

// find returns the remembered line, among the window lines from cur on, that l matches up to
// its value, or -1.
func (sh *decoded) find(l []byte, cur, window int) int {
	a := sh.arena
	for j := cur; j < len(sh.segs) && j < cur+window; j++ {
		s := sh.segs[j]
		pre := a[s.off:s.end]
		if s.note {
			// Any comment that Parse accepts matches a remembered one; the first in the window
			// only, since comments are many and alike.
			if comment(l) {
				if commentOK(l) {
					return j
				}
				return -1
			}
			continue
		}
		if s.sample {
			if len(l) > len(pre) && !isBlank(l[len(pre)]) && string(l[:len(pre)]) == string(pre) &&
				(len(pre) == 0 || valueAfter(pre[len(pre)-1], l[len(pre)])) {
				return j
			}
		} else if string(l) == string(pre) {
			return j
		}
	}
	return -1
}
