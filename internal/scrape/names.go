package scrape

import (
	"bytes"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Asking for fewer samples. prometheus_client (which serves vLLM's /metrics) renders only the
// samples named by name[] query parameters when a request has some: a smaller page, cheaper to
// render, send and parse. Other servers ignore the parameters, which is fine. But one honours
// them wrongly: its restricted registry only finds collectors that describe their names, so a
// registry holding a MultiProcessCollector (vLLM with several API server processes) answers an
// empty page. A restricted answer is therefore checked against the target's last full page, and
// a target whose answer lacks a sample name that the full page has is asked for full pages
// from then on.

// sampleNames are the sample names vllmstat reads, with the namespace spelling of each (an index
// in vllm.Namespaces) and, per set of namespaces, the name[] query asking for all of them.
type sampleNames struct {
	names []string
	ns    []uint8
	index map[string]int
	// asked are the names a query asks for, with their namespaces: the sample names, and the
	// family name of each histogram, which Go's client_golang filters by (prometheus_client
	// filters by sample name and renders nothing more for a family name).
	asked   []string
	askedNS []uint8
	queries sync.Map // nsMask -> string
}

// nsMask is a set of namespace spellings, bit i for queryNamespaces[i].
type nsMask uint8

var readNames = sync.OnceValue(func() *sampleNames {
	s := &sampleNames{names: page.SampleNames(), index: map[string]int{}}
	for i, n := range s.names {
		s.index[n] = i
		s.ns = append(s.ns, namespaceOf(n))
	}
	s.asked, s.askedNS = slices.Clone(s.names), slices.Clone(s.ns)
	for i, n := range s.names {
		if base, ok := strings.CutSuffix(n, "_bucket"); ok {
			s.asked = append(s.asked, base)
			s.askedNS = append(s.askedNS, s.ns[i])
		}
	}
	return s
})

// queryNamespaces are the namespace spellings of the names a query may ask for: vLLM's, then
// TensorRT-LLM's (see page.SampleNames). A page's query asks for the names of the spellings it
// has.
var queryNamespaces = append(slices.Clip(vllm.Namespaces), vllm.Engines[vllm.TRTLLM].Namespaces...)

// namespaceOf returns the index in queryNamespaces of the spelling name begins with (the
// longest, as "ray_vllm_" also holds "vllm_").
func namespaceOf(name string) uint8 {
	best, bestLen := uint8(0), -1
	for i, p := range queryNamespaces {
		if strings.HasPrefix(name, p) && len(p) > bestLen {
			best, bestLen = uint8(i), len(p)
		}
	}
	return best
}

// query returns the name[] parameters asking for every sample name in the namespaces of m,
// escaped for a URL query.
func (s *sampleNames) query(m nsMask) string {
	if q, ok := s.queries.Load(m); ok {
		return q.(string)
	}
	var b strings.Builder
	key := url.QueryEscape("name[]") + "="
	for i, n := range s.asked {
		if m&(1<<s.askedNS[i]) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(key)
		b.WriteString(url.QueryEscape(n))
	}
	q, _ := s.queries.LoadOrStore(m, b.String())
	return q.(string)
}

// nameSet is a set of sample names, by index in readNames().names.
type nameSet []uint64

func newNameSet(n int) nameSet   { return make(nameSet, (n+63)/64) }
func (s nameSet) add(i int)      { s[i/64] |= 1 << (i % 64) }
func (s nameSet) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }

// firstMissing returns the index of a name in s that o lacks, or -1.
func (s nameSet) firstMissing(o nameSet) int {
	for i, w := range s {
		if d := w &^ o[i]; d != 0 {
			for j := range 64 {
				if d&(1<<j) != 0 {
					return i*64 + j
				}
			}
		}
	}
	return -1
}

// mask returns the namespaces of the names in s.
func (s nameSet) mask(sn *sampleNames) nsMask {
	var m nsMask
	for i := range sn.names {
		if s.has(i) {
			m |= 1 << sn.ns[i]
		}
	}
	return m
}

// scanNames adds to set the sample names vllmstat reads that page has, and reports whether the
// page has samples of other names too. It looks at each sample line's name only, and a page's
// samples come in runs of one name (a histogram's buckets), so most lines cost a comparison
// with the line before.
func scanNames(page []byte, sn *sampleNames, set nameSet) (others bool) {
	var last []byte
	for len(page) > 0 {
		line := page
		if i := bytes.IndexByte(page, '\n'); i >= 0 {
			line, page = page[:i], page[i+1:]
		} else {
			page = nil
		}
		for len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			line = line[1:]
		}
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if len(last) > 0 && len(line) > len(last) && bytes.HasPrefix(line, last) && endsName(line[len(last)]) {
			continue
		}
		n := 0
		for n < len(line) && !endsName(line[n]) {
			n++
		}
		last = line[:n]
		if i, ok := sn.index[string(last)]; ok {
			set.add(i)
		} else {
			others = true
		}
	}
	return others
}

func endsName(c byte) bool { return c == '{' || c == ' ' || c == '\t' }

// restriction is one target's state of asking for fewer samples, owned by the target's
// goroutine.
type restriction struct {
	sn *sampleNames
	// full holds the names of the last full page, and of every restricted page since: a name
	// once seen that a restricted page lacks makes the scrape ask for the full page again.
	full nameSet
	got  nameSet // the names of the last restricted page
	prev nameSet // scratch
	mask nsMask  // the namespaces asked for; 0 asks for the full page
	off  bool    // the server answers restricted requests wrongly: never restrict again
	// ignored is set when the server answered a restricted request with samples not asked for:
	// it ignores name[], and asking costs kilobytes of query for nothing.
	ignored bool
	scans   int // restricted pages scanned, for tests
}

func newRestriction() *restriction {
	sn := readNames()
	n := len(sn.names)
	return &restriction{sn: sn, full: newNameSet(n), got: newNameSet(n), prev: newNameSet(n)}
}

// active reports that the next scrape may ask for the names only.
func (r *restriction) active() bool { return r.learning() && r.mask != 0 }

// learning reports whether full pages are to be scanned for the names to ask for.
func (r *restriction) learning() bool { return !r.off && !r.ignored }

// reset makes the next scrape ask for the full page, and learn from it again.
func (r *restriction) reset() { r.mask, r.ignored = 0, false; clear(r.full) }

// restrict starts restricting to the namespaces of names (which must be sample names vllmstat
// reads), as if a full page with them had been seen.
func (r *restriction) restrict(names []string) {
	clear(r.full)
	for _, n := range names {
		r.full.add(r.sn.index[n])
	}
	r.mask = r.full.mask(r.sn)
}

// sawFull learns from a full page: the names it has and their namespaces. A page without any
// name vllmstat reads tells no namespace, so the next scrape asks for the full page again.
func (r *restriction) sawFull(page []byte) {
	clear(r.full)
	scanNames(page, r.sn, r.full)
	r.mask = r.full.mask(r.sn)
}

// checkRestricted returns -1 when a restricted page has every name seen so far (and adds its
// new names to them), or else the index of a name it lacks.
func (r *restriction) checkRestricted(page []byte) (missing int) {
	r.scans++
	clear(r.got)
	if scanNames(page, r.sn, r.got) {
		// Names not asked for: the server ignores name[] (Ray's agent, prometheus_client's
		// ASGI app before 0.23, Go servers without the filter); the page is the full one.
		r.ignored = true
	}
	if m := r.full.firstMissing(r.got); m >= 0 {
		return m
	}
	for i, w := range r.got {
		r.full[i] |= w
	}
	return -1
}

// sawFullAfter learns from a full page fetched because the restricted page before it lacked
// names, and returns the index of one of them that the full page has, or -1. A name that both
// lack went away (a restarted server, say); a name only the restricted page lacks means the
// server's restricted answers lose data, and the target is never restricted again.
func (r *restriction) sawFullAfter(page []byte) (lost int) {
	copy(r.prev, r.full) // the names seen before
	r.sawFull(page)
	for i := range r.prev {
		r.prev[i] &= r.full[i] // ... that the full page has
	}
	if lost = r.prev.firstMissing(r.got); lost >= 0 { // ... and the restricted one lacks
		r.off = true
	}
	return lost
}
