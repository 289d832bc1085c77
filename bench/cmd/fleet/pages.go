package main

import (
	"bytes"
	"compress/gzip"
	"net/url"
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

	mu sync.RWMutex
	// byNames holds the restricted sets by their sorted names, joined by newlines; byQuery holds
	// them by the raw query strings that asked for them, so that a query seen before costs one
	// lookup and no parsing: a scraper sends the same query on every scrape. A query without
	// names maps to nil, the full page.
	byNames map[string]*restrictedSet
	byQuery map[string]*restrictedSet
}

// maxQueries bounds byQuery, against a client that sends a new query every time (a
// cache-busting parameter): past it, queries are parsed on every request.
const maxQueries = 1 << 12

type restrictedSet struct {
	names  map[string]bool
	once   sync.Once
	bodies []body
}

func newPages(variants [][]byte) *pages {
	p := &pages{raw: variants, byNames: map[string]*restrictedSet{}, byQuery: map[string]*restrictedSet{}}
	for _, v := range variants {
		p.full = append(p.full, newBody(v))
	}
	return p
}

// get returns variant k, restricted to the names the name[] parameters of query (a raw URL
// query string) give, if it has any.
func (p *pages) get(k int, query []byte) body {
	if len(query) == 0 {
		return p.full[k]
	}
	p.mu.RLock()
	rs, ok := p.byQuery[string(query)]
	p.mu.RUnlock()
	if !ok {
		rs = p.lookup(string(query))
	}
	if rs == nil {
		return p.full[k]
	}
	// Requests for a set not rendered yet wait for the one that renders it.
	rs.once.Do(func() {
		for _, v := range p.raw {
			rs.bodies = append(rs.bodies, newBody(restrict(v, rs.names)))
		}
	})
	return rs.bodies[k]
}

// lookup parses query, finds or makes the set of its names, and remembers it for query. It
// returns nil when query has no names.
func (p *pages) lookup(query string) *restrictedSet {
	// A malformed pair is skipped; the others count, as net/http's Request.URL.Query gives them.
	values, _ := url.ParseQuery(query)
	var names []string
	for _, n := range values["name[]"] {
		// Empty values are dropped, as Python's parse_qs drops them.
		if n != "" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	key := strings.Join(names, "\n")
	p.mu.Lock()
	defer p.mu.Unlock()
	var rs *restrictedSet
	if len(names) > 0 {
		if rs = p.byNames[key]; rs == nil {
			rs = &restrictedSet{names: map[string]bool{}}
			for _, n := range names {
				rs.names[n] = true
			}
			p.byNames[key] = rs
		}
	}
	if len(p.byQuery) < maxQueries {
		p.byQuery[query] = rs
	}
	return rs
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
