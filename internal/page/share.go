package page

import (
	"encoding/binary"
	"maps"
	"math"
	"runtime"
	"slices"
	"sync"
	"weak"
)

// A fleet's targets serve pages of the same lines (the same families, labels and model), and
// their Parsers learn the same program and kept raws from them. Both are never changed once
// made, so Parsers that learnt equal ones share one copy: a copy per target was half of the
// memory of a thousand targets' parsers. Sharing goes by content, so it never depends on
// where a structure came from, and a structure no Parser holds any more is collected.
var (
	programs  = newShared[program]()
	kepts     = newShared[keptRaws]()
	templates = newShared[template]()
)

// template is the structure of a fleet's pages: what assemble makes of their lines, apart from
// the values a program writes (fill writes every value of a page of this structure, and leaves
// the others at assemble's zero). Parsers of pages alike share one, and fill pages taken from
// its free list: a page kept by each Parser between scrapes was 6 to 9 KB a target, while a
// fleet has only the pages of the scrapes in flight in use. Its page is never handed out; the
// pages handed out are copies of it.
type template struct {
	page *Page
	mu   sync.Mutex
	free []*Page // released pages, at most maxFree
}

// maxFree bounds the released pages a template keeps. A fleet's scrapes in flight between ticks
// are a few; a step end's, one per target, are copied anew at the next step end beyond this.
const maxFree = 64

// take returns a released page, or a new copy of the template's.
func (t *template) take() *Page {
	t.mu.Lock()
	if n := len(t.free); n > 0 {
		pg := t.free[n-1]
		t.free[n-1] = nil
		t.free = t.free[:n-1]
		t.mu.Unlock()
		pg.owner.released.Store(false)
		return pg
	}
	t.mu.Unlock()
	pg := clonePage(t.page)
	pg.owner = &pageOwner{tmpl: t}
	return pg
}

// put keeps a released page for take, unless enough are kept.
func (t *template) put(pg *Page) {
	t.mu.Lock()
	if len(t.free) < maxFree {
		t.free = append(t.free, pg)
	}
	t.mu.Unlock()
}

// shareTemplate returns the shared template of pg's structure, made from a copy of pg when
// there is none yet.
func shareTemplate(pg *Page) *template {
	return templates.shareFunc(structureKey(pg), func() *template { return &template{page: clonePage(pg)} })
}

// structureKey is everything of a page that fill does not write: its workers, which gauges and
// split values they have, their series with their labels and bucket bounds, and their copies.
func structureKey(pg *Page) string {
	var b keyBuf
	b.int(len(pg.Engines))
	for i := range pg.Engines {
		b.engine(&pg.Engines[i])
	}
	return string(b)
}

// engine writes the structure of ep, its copies' too.
func (b *keyBuf) engine(ep *EnginePage) {
	b.int(int(ep.Kind))
	b.str(ep.Engine)
	b.str(ep.Labels)
	b.str(ep.Copy)
	for _, has := range ep.HasGauge {
		b.bool(has)
	}
	b.int(len(ep.SplitGauges))
	for _, g := range slices.Sorted(maps.Keys(ep.SplitGauges)) {
		b.int(int(g))
		vs := ep.SplitGauges[g]
		b.int(len(vs))
		for _, v := range slices.Sorted(maps.Keys(vs)) {
			b.str(v)
		}
	}
	b.int(len(ep.Counters))
	for _, c := range ep.Counters {
		b.int(int(c.Family))
		b.str(c.Key)
		b.str(c.Reason)
		b.bool(c.HasCreated)
		b.bool(c.Ranked)
	}
	b.int(len(ep.Hists))
	for _, h := range ep.Hists {
		b.int(int(h.Family))
		b.str(h.Key)
		b.bool(h.HasSum)
		b.bool(h.HasCreated)
		b.bool(h.Ranked)
		b.int(len(h.Buckets))
		for _, bk := range h.Buckets {
			*b = binary.LittleEndian.AppendUint64(*b, math.Float64bits(bk.Le))
		}
	}
	b.int(len(ep.Copies))
	for i := range ep.Copies {
		b.engine(&ep.Copies[i])
	}
}

// shareProgram returns the shared program equal to pr (pr itself when it is the first); nil
// for nil.
func shareProgram(pr *program) *program {
	if pr == nil {
		return nil
	}
	return programs.share(pr, pr.key())
}

// shareKept returns the shared kept raws equal to kr; nil for nil.
func shareKept(kr *keptRaws) *keptRaws {
	if kr == nil {
		return nil
	}
	return kepts.share(kr, kr.key())
}

// shared is a set of values of T by content, holding them weakly.
type shared[T any] struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[T]
}

func newShared[T any]() *shared[T] { return &shared[T]{m: map[string]weak.Pointer[T]{}} }

// share returns the value whose content is key, v when there is none yet.
func (s *shared[T]) share(v *T, key string) *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.m[key].Value(); old != nil {
		return old
	}
	s.m[key] = weak.Make(v)
	runtime.AddCleanup(v, s.forget, key)
	return v
}

// shareFunc returns the value whose content is key, made by make when there is none yet.
func (s *shared[T]) shareFunc(key string, make func() *T) *T {
	s.mu.Lock()
	if old := s.m[key].Value(); old != nil {
		s.mu.Unlock()
		return old
	}
	s.mu.Unlock()
	return s.share(make(), key)
}

// forget drops key once its value is collected, unless a newer value took its place.
func (s *shared[T]) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[key].Value() == nil {
		delete(s.m, key)
	}
}

// key is the program's content, every field of it.
func (pr *program) key() string {
	var b keyBuf
	b.int(len(pr.ops))
	for _, o := range pr.ops {
		b.int(int(o.kind))
		b.int(int(o.e))
		b.int(int(o.i))
		b.int(int(o.j))
	}
	b.int(len(pr.finite))
	for _, k := range pr.finite {
		b.int(int(k))
	}
	b.int(len(pr.gauges))
	for _, g := range pr.gauges {
		b.int(int(g.e))
		b.int(int(g.g))
		b.int(g.n)
		b.bool(g.mean)
	}
	b.int(len(pr.splits))
	for _, sp := range pr.splits {
		b.int(int(sp.e))
		b.int(int(sp.g))
		b.str(sp.reason)
		b.int(sp.n)
		b.bool(sp.div)
	}
	b.int(len(pr.hists))
	for _, f := range pr.hists {
		b.int(int(f.e))
		b.int(int(f.h))
		b.bool(f.countFromInf)
		b.bool(f.infFromCount)
		b.bool(f.seen)
	}
	b.int(len(pr.views))
	for _, v := range pr.views {
		b.int(int(v.e))
		b.int(int(v.a))
	}
	b.int(len(pr.dups))
	for _, d := range pr.dups {
		b.int(int(d.k))
		b.int(int(d.o.kind))
		b.int(int(d.o.e))
		b.int(int(d.o.i))
		b.int(int(d.o.j))
	}
	return string(b)
}

// key is the kept raws' content, every field of it.
func (kr *keptRaws) key() string {
	var b keyBuf
	b.int(len(kr.raws))
	for _, r := range kr.raws {
		b.int(int(r.meta))
		b.int(int(r.worker))
		b.int(int(r.key))
		b.int(int(r.reason))
		b.int(int(r.le))
	}
	b.int(len(kr.strs))
	for _, s := range kr.strs {
		b.str(s)
	}
	b.int(len(kr.les))
	for _, le := range kr.les {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(le))
	}
	b.int(len(kr.workers))
	for _, w := range kr.workers {
		b.str(w.engine)
		b.str(w.labels)
		b.int(int(w.kind))
		b.bool(w.rank.ranked)
		b.int(int(w.rank.of[0]))
		b.int(int(w.rank.of[1]))
		b.str(w.rank.id)
	}
	return string(b)
}

// keyBuf writes a content key: numbers as varints, strings with their length first, so that
// two different contents never write the same bytes.
type keyBuf []byte

func (b *keyBuf) int(v int) { *b = binary.AppendVarint(*b, int64(v)) }

func (b *keyBuf) bool(v bool) {
	if v {
		b.int(1)
	} else {
		b.int(0)
	}
}

func (b *keyBuf) str(s string) {
	b.int(len(s))
	*b = append(*b, s...)
}
