package main

import (
	"bytes"
	"compress/gzip"
	"slices"
	"strings"
	"sync"
)

// body is one rendering of the page, plain and gzipped.
type body struct {
	plain, gz []byte
}

func newBody(plain []byte) body {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression) // the level is valid
	zw.Write(plain)                                        // a bytes.Buffer does not fail
	zw.Close()
	return body{plain: plain, gz: b.Bytes()}
}

// pages holds the variants of the page, and the same variants restricted to the sample names a
// scraper asked for, rendered the first time a set of names is asked for.
type pages struct {
	full []body
	// raw are the variants before compression, to restrict from.
	raw [][]byte

	mu         sync.Mutex
	restricted map[string]*restrictedSet // by the sorted names, joined by newlines
}

type restrictedSet struct {
	once   sync.Once
	bodies []body
}

func newPages(variants [][]byte) *pages {
	p := &pages{raw: variants, restricted: map[string]*restrictedSet{}}
	for _, v := range variants {
		p.full = append(p.full, newBody(v))
	}
	return p
}

// get returns variant k, restricted to names when names is not empty.
func (p *pages) get(k int, names []string) body {
	if len(names) == 0 {
		return p.full[k]
	}
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	key := strings.Join(names, "\n")
	p.mu.Lock()
	rs := p.restricted[key]
	if rs == nil {
		rs = &restrictedSet{}
		p.restricted[key] = rs
	}
	p.mu.Unlock()
	// Requests for a set not rendered yet wait for the one that renders it.
	rs.once.Do(func() {
		set := map[string]bool{}
		for _, n := range names {
			set[n] = true
		}
		for _, v := range p.raw {
			rs.bodies = append(rs.bodies, newBody(restrict(v, set)))
		}
	})
	return rs.bodies[k]
}

// restrict keeps the samples of page whose sample name is in names, and the HELP and TYPE lines
// of the families that keep at least one, as prometheus_client renders a registry restricted by
// name[] query parameters: a histogram asked for by its _bucket name gives its buckets alone.
// prometheus_client renders a counter's (or histogram's) _created samples as a family of their
// own after the counter's; it prints the counter's HELP and TYPE whenever any of its samples is
// kept, so a page restricted to _created samples has those lines without samples too.
func restrict(page []byte, names map[string]bool) []byte {
	var out []byte
	var cur, prev family
	inSamples := false
	for line := range bytes.Lines(page) {
		if len(line) > 0 && line[0] == '#' {
			// A family's comments come before its samples: HELP, then TYPE.
			isType := bytes.HasPrefix(line, []byte("# TYPE "))
			if inSamples || bytes.HasPrefix(line, []byte("# HELP ")) || isType && cur.name != "" {
				prev, cur, inSamples = cur, family{}, false
			}
			if isType {
				if f := strings.Fields(string(line[len("# TYPE "):])); len(f) == 2 {
					cur.name = f[0]
				}
			}
			cur.head = append(cur.head, line...)
			continue
		}
		inSamples = true
		if !names[sampleName(line)] {
			continue
		}
		if !cur.kept {
			if base, ok := strings.CutSuffix(cur.name, "_created"); ok && !prev.kept &&
				(prev.name == base+"_total" || prev.name == base) {
				out = append(out, prev.head...)
				prev.kept = true
			}
			out = append(out, cur.head...)
			cur.kept = true
		}
		out = append(out, line...)
	}
	return out
}

// family is the part of a page restrict is in: its HELP and TYPE lines, its name as TYPE gives
// it, and whether it kept a sample.
type family struct {
	head []byte
	name string
	kept bool
}

// sampleName returns the metric name a sample line starts with.
func sampleName(line []byte) string {
	end := bytes.IndexAny(line, "{ \t\n")
	if end < 0 {
		end = len(line)
	}
	return string(line[:end])
}
