package window

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vllmstat/vllmstat/internal/expo"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Page is what vllmstat keeps of one scrape: per worker, the samples of the families it reads,
// each family in the one spelling chosen for the page.
type Page struct {
	Engines []EnginePage // sorted by Engine, then Labels, then Kind
	// owner is set on a page a Parser may fill again once its reader releases it.
	owner *pageOwner
}

// EnginePage holds one worker's samples: one engine, told apart from the page's other engines by
// its engine label and by its worker labels (see Options.WorkerLabels, and the engine kind's
// own, vllm.EngineSpec.WorkerLabels). A target without an engine label has one EnginePage with
// Engine "" per set of worker labels and engine kind.
type EnginePage struct {
	// Kind is the engine kind whose families the samples are of.
	Kind   vllm.Engine
	Engine string
	// Labels are the worker labels the samples carry, as a series key sorted by name
	// (`ReplicaId="r1",WorkerId="w1"`; see LabelMap), "" when they carry none. Like engine, they
	// are not part of the series keys.
	Labels   string
	Gauges   [NumGauges]float64
	HasGauge [NumGauges]bool
	// SplitGauges holds, for a gauge family with a split label, its value by the label's value
	// (Gauges then holds the combined value of all its series); nil when the page has none.
	SplitGauges map[Gauge]map[string]float64
	Counters    []CounterSeries
	Hists       []HistSeries
}

// CounterSeries is one series of a counter family: its labels other than engine identify it.
type CounterSeries struct {
	Family     Counter
	Key        string // the other labels, sorted and quoted: `finished_reason="stop",model_name="m"`
	Reason     string // the value of the family's split label (finished_reason for RequestSuccess)
	Value      float64
	Created    float64 // Unix seconds; valid when HasCreated
	HasCreated bool
}

// HistSeries is one series of a histogram family. Its Count is the _count sample, or the +Inf
// bucket's count when the page has no _count; a page without a +Inf bucket gets one holding
// _count, and a series with neither is not kept (the exposition format makes them equal).
type HistSeries struct {
	Family     Hist
	Key        string
	Buckets    []Bucket // cumulative, sorted by Le, +Inf last
	Sum, Count float64
	HasSum     bool // the page had a _sum sample; without it there is no mean
	Created    float64
	HasCreated bool
}

// Bucket is a cumulative histogram bucket.
type Bucket struct {
	Le    float64
	Count float64
}

var table = buildNames()
var tableSet = expo.NewNames(table.names)

// raw is a sample kept during the first pass over a page, before spellings are chosen.
type raw struct {
	meta   int32
	worker int32 // index in the page's workerTable
	key    string
	reason string
	le     float64
	value  float64
}

// ParsePage parses an exposition page and keeps what vllmstat reads. A page that is not valid
// Prometheus or OpenMetrics text is an error, whatever it contains. It sets no limits and tells
// workers apart by DefaultWorkerLabels; see ParsePageOptions.
func ParsePage(body []byte) (*Page, error) { return parse(body, Options{}) }

func parse(body []byte, opt Options) (*Page, error) {
	raws, best, workers, err := collect(body, opt, nil)
	if err != nil {
		return nil, err
	}
	return assemble(raws, best, workers), nil
}

// stop carries a limit error out of expo.Parse's callback, which has no other way to end the
// parse: a page over its limits is abandoned at the first sample too many, before the rest of it
// is decoded and interned.
type stop struct{ err error }

// collect reads the samples of the families vllmstat reads from body, and which spelling of
// each family is the page's. With sh set, the page's lines are remembered there too.
func collect(body []byte, opt Options, sh *expo.Shape) (raws []raw, _ [3][]int, workers []workerKey, err error) {
	c := newCollector(opt, len(body))
	err = c.run(func() error {
		if sh != nil {
			return sh.Parse(body, tableSet, c.sample)
		}
		return expo.Parse(body, tableSet, c.sample)
	})
	if err != nil {
		return nil, c.best, nil, err
	}
	return c.raws, c.best, c.wt.keys, nil
}

// collector gathers a page's raws as expo emits its samples.
type collector struct {
	lim  Limits
	wl   []string
	raws []raw
	best [3][]int // lowest rank seen per kind, and engine and family (see meta.slot)
	bad  error
	kv   []string
	wkv  []string
	buf  []byte
	keys map[string]string // series keys repeat across a page's families: build each once
	wt   workerTable       // counted against lim.MaxWorkers
	// Consecutive samples mostly belong to one worker; its engine and labels are interned
	// strings, so comparing them with the last sample's is cheap.
	last    workerKey
	lastIdx int32
}

func newCollector(opt Options, size int) *collector {
	c := &collector{lim: opt.Limits, wl: opt.WorkerLabels, keys: map[string]string{}, lastIdx: -1}
	if c.wl == nil {
		c.wl = defaultWorkerLabels
	}
	// About a third of a vLLM page's lines are kept; a huge page grows the slice as it goes, so
	// that refusing one at a limit costs no more than the limit.
	c.raws = make([]raw, 0, min(size/256, 4096))
	for k, n := range numFams {
		c.best[k] = fill(int(vllm.NumEngines) * n)
	}
	return c
}

// run runs parse, whose callbacks may stop it at a limit, and returns its error, a limit's, or
// the first bad le.
func (c *collector) run(parse func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s, ok := r.(stop)
			if !ok {
				panic(r)
			}
			err = s.err
		}
	}()
	if err = parse(); err == nil {
		err = c.bad
	}
	return err
}

func (c *collector) intern(b []byte) string {
	k, ok := c.keys[string(b)]
	if !ok {
		k = string(b)
		c.keys[k] = k
	}
	return k
}

// room stops the parse when the page has as many series as its limit allows already.
func (c *collector) room(line int) {
	if c.lim.MaxSeries > 0 && len(c.raws) >= c.lim.MaxSeries {
		panic(stop{fmt.Errorf("%w: line %d: more than the limit of %d series (samples of the families vllmstat reads) per target", ErrLimit, line, c.lim.MaxSeries)})
	}
}

// worker returns the number of worker wk, numbering it if it is new, within the limit.
func (c *collector) worker(wk workerKey, line int) int32 {
	i := c.wt.find(wk)
	if i < 0 {
		if c.lim.MaxWorkers > 0 && len(c.wt.keys) >= c.lim.MaxWorkers {
			panic(stop{fmt.Errorf("%w: line %d: %s is one more than the limit of %d workers (engines) per target", ErrLimit, line, wk, c.lim.MaxWorkers)})
		}
		i = c.wt.add(wk)
	}
	return i
}

// keep adds a raw whose worker is numbered.
func (c *collector) keep(r raw) {
	if m := &table.metas[r.meta]; m.role != rCreated && m.rank < c.best[m.kind][m.slot()] {
		c.best[m.kind][m.slot()] = m.rank
	}
	c.raws = append(c.raws, r)
}

// sample decodes one sample expo emits.
func (c *collector) sample(s *expo.Sample) {
	c.room(s.Line)
	m := table.metas[s.ID]
	r := raw{meta: int32(s.ID), value: s.Value}
	wk := workerKey{kind: m.eng}
	es := &vllm.Engines[m.eng]
	c.kv = c.kv[:0]
	for _, l := range s.Labels {
		switch l.Name {
		case "engine":
			wk.engine = l.Value
			continue
		case "le":
			if m.role == rBucket {
				le, err := strconv.ParseFloat(l.Value, 64)
				if err != nil && c.bad == nil {
					c.bad = fmt.Errorf("line %d: %s: invalid le %q", s.Line, s.Name, l.Value)
				}
				r.le = le
				continue
			}
		default:
			if m.split != "" && l.Name == m.split {
				r.reason = l.Value // and it stays in the key
				break
			}
			if slices.Contains(c.wl, l.Name) || slices.Contains(es.WorkerLabels, l.Name) {
				c.wkv = append(c.wkv, l.Name, l.Value)
				continue
			}
			if i := slices.Index(es.RankLabels, l.Name); i >= 0 {
				wk.rank.set(i, l.Value)
				continue
			}
		}
		c.kv = append(c.kv, l.Name, l.Value)
	}
	if len(c.wkv) > 0 {
		sortPairs(c.wkv)
		c.buf = appendKey(c.buf[:0], c.wkv)
		if wk.labels = c.last.labels; string(c.buf) != wk.labels {
			wk.labels = c.intern(c.buf)
		}
		c.wkv = c.wkv[:0]
	}
	if c.lastIdx < 0 || wk != c.last {
		c.last, c.lastIdx = wk, c.worker(wk, s.Line)
	}
	r.worker = c.lastIdx
	if m.role == rBucket && !hasLabel(s.Labels, "le") && c.bad == nil {
		c.bad = fmt.Errorf("line %d: %s: bucket without le label", s.Line, s.Name)
	}
	sortPairs(c.kv)
	c.buf = appendKey(c.buf[:0], c.kv)
	r.key = c.intern(c.buf)
	c.keep(r)
}

// workerTable numbers a page's workers in the order they appear.
type workerTable struct {
	keys  []workerKey
	index map[workerKey]int32 // built once a page has more workers than a scan is worth
}

// find returns the number of worker k, or -1.
func (t *workerTable) find(k workerKey) int32 {
	if t.index != nil {
		if i, ok := t.index[k]; ok {
			return i
		}
		return -1
	}
	for i, o := range t.keys {
		if o == k {
			return int32(i)
		}
	}
	return -1
}

// add numbers a worker not in the table yet.
func (t *workerTable) add(k workerKey) int32 {
	i := int32(len(t.keys))
	t.keys = append(t.keys, k)
	switch {
	case t.index != nil:
		t.index[k] = i
	case len(t.keys) > 8:
		t.index = make(map[workerKey]int32, 2*len(t.keys))
		for j, o := range t.keys {
			t.index[o] = int32(j)
		}
	}
	return i
}

// workerKey tells a page's workers apart: the engine kind, the engine label, the worker labels'
// key, and the ranks of the process that exported the samples (see groupWorkers).
type workerKey struct {
	engine, labels string
	kind           vllm.Engine
	rank           rank
}

// String names the worker in limit errors; a worker without worker labels reads as it did
// before there were any.
func (k workerKey) String() string {
	s := fmt.Sprintf("engine %q", k.engine)
	if k.labels != "" {
		s += " with " + k.labels
	}
	if k.rank.ranked {
		s += " at ranks " + k.rank.String()
	}
	return s
}

// rank is the ranks a sample's rank labels (vllm.EngineSpec.RankLabels) give, in their order;
// ranked is set when it has any. A value that is not a number ranks after every number.
type rank struct {
	of     [2]int32
	ranked bool
}

func (r *rank) set(i int, v string) {
	if i >= len(r.of) {
		return
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		n = math.MaxInt32
	}
	r.of[i], r.ranked = int32(n), true
}

func (r rank) less(o rank) bool { return r.of[0] < o.of[0] || r.of[0] == o.of[0] && r.of[1] < o.of[1] }

func (r rank) String() string { return fmt.Sprintf("%d/%d", r.of[0], r.of[1]) }

// groupWorkers maps a page's workers to the workers it reports, in order of their first sample:
// every process of a worker that exports copies of its figures (its ranks: SGLang's TP and PP
// ranks of one DP rank) is one worker, whose samples are those of its lowest ranks, and of the
// process without ranks that exports the rest (SGLang's tokenizer), if any. group[w] is the
// reported worker of page worker w, -1 for a copy left out; keys are the reported workers,
// without ranks. A page without ranks maps every worker to itself.
func groupWorkers(workers []workerKey) (group []int32, keys []workerKey) {
	group = make([]int32, len(workers))
	ranked := false
	for i, w := range workers {
		group[i] = int32(i)
		ranked = ranked || w.rank.ranked
	}
	if !ranked {
		return group, workers
	}
	type best struct {
		key  int32
		rank rank
		w    int // the page worker of the lowest ranks so far, -1 for none
	}
	by := map[workerKey]*best{}
	for i, w := range workers {
		k := workerKey{engine: w.engine, labels: w.labels, kind: w.kind}
		b := by[k]
		if b == nil {
			b = &best{key: int32(len(keys)), w: -1}
			by[k] = b
			keys = append(keys, k)
		}
		group[i] = b.key
		if !w.rank.ranked {
			continue
		}
		if b.w < 0 || w.rank.less(b.rank) {
			if b.w >= 0 {
				group[b.w] = -1
			}
			b.w, b.rank = i, w.rank
		} else {
			group[i] = -1
		}
	}
	return group, keys
}

// appendKey appends the series key of sorted name, value pairs: name="value" pairs joined by
// commas, each value quoted with its backslashes, quotes and newlines escaped as in the
// exposition format, so that two different label sets never share a key (a value may hold
// commas, equals signs and quotes).
func appendKey(buf []byte, kv []string) []byte {
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, kv[i]...)
		buf = append(buf, '=', '"')
		v := kv[i+1]
		if strings.ContainsAny(v, "\\\"\n") {
			for j := 0; j < len(v); j++ {
				switch v[j] {
				case '\\', '"':
					buf = append(buf, '\\', v[j])
				case '\n':
					buf = append(buf, '\\', 'n')
				default:
					buf = append(buf, v[j])
				}
			}
		} else {
			buf = append(buf, v...)
		}
		buf = append(buf, '"')
	}
	return buf
}

func hasLabel(ls []expo.Label, name string) bool {
	for _, l := range ls {
		if l.Name == name {
			return true
		}
	}
	return false
}

func fill(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = math.MaxInt
	}
	return s
}

// chosen reports whether a sample belongs to the spelling read for its family.
func chosen(m meta, best [3][]int) bool {
	b := best[m.kind][m.slot()]
	if b == math.MaxInt {
		return false
	}
	if m.kind == kCounter {
		// a counter's value spellings rank 2*group and 2*group+1; its _created shares the group
		return m.group == b/2 && (m.role == rCreated || m.rank == b)
	}
	return m.rank == b
}

func assemble(raws []raw, best [3][]int, pageWorkers []workerKey) *Page {
	group, workers := groupWorkers(pageWorkers)
	byWorker := make([]*EnginePage, len(workers))
	type hkey struct {
		fam Hist
		key string
	}
	hists := make([]map[hkey]*histAsm, len(workers))
	type ckey struct {
		fam Counter
		key string
	}
	counters := make([]map[ckey]*CounterSeries, len(workers))
	gaugeN := make([][NumGauges]int, len(workers))
	type splitKey struct {
		worker int32
		g      Gauge
		value  string
	}
	var splitN map[splitKey]int // series per split value, for averaged split gauges only
	for g, f := range vllm.Gauges {
		for e := range vllm.NumEngines {
			if f.Split != "" && f.Combine == vllm.Mean && best[kGauge][int(e)*int(NumGauges)+g] != math.MaxInt {
				splitN = map[splitKey]int{}
			}
		}
	}
	for _, r := range raws {
		m := table.metas[r.meta]
		wk := group[r.worker]
		if wk < 0 || !chosen(m, best) {
			continue
		}
		ep := byWorker[wk]
		if ep == nil {
			ep = &EnginePage{Kind: workers[wk].kind, Engine: workers[wk].engine, Labels: workers[wk].labels}
			byWorker[wk] = ep
			hists[wk] = map[hkey]*histAsm{}
			counters[wk] = map[ckey]*CounterSeries{}
		}
		switch m.kind {
		case kGauge:
			g := Gauge(m.fam)
			if math.IsNaN(r.value) || math.IsInf(r.value, 0) {
				continue // not a sample: it would make a mean, a max and a p95 disagree
			}
			// Combined as the spec says: summed, or averaged below.
			ep.Gauges[g] += r.value
			ep.HasGauge[g] = true
			gaugeN[wk][g]++
			if m.split != "" {
				if ep.SplitGauges == nil {
					ep.SplitGauges = map[Gauge]map[string]float64{}
				}
				if ep.SplitGauges[g] == nil {
					ep.SplitGauges[g] = map[string]float64{}
				}
				ep.SplitGauges[g][r.reason] += r.value
				if vllm.Gauges[g].Combine == vllm.Mean {
					splitN[splitKey{wk, g, r.reason}]++
				}
			}
		case kCounter:
			k := ckey{Counter(m.fam), r.key}
			cs := counters[wk][k]
			if cs == nil {
				cs = &CounterSeries{Family: k.fam, Key: r.key, Reason: r.reason}
				counters[wk][k] = cs
			}
			if m.role == rCreated {
				if finite(r.value) { // a non-finite creation time says nothing
					cs.Created, cs.HasCreated = r.value, true
				}
			} else {
				cs.Value = r.value
			}
		case kHist:
			k := hkey{Hist(m.fam), r.key}
			h := hists[wk][k]
			if h == nil {
				h = &histAsm{HistSeries: HistSeries{Family: k.fam, Key: r.key}}
				hists[wk][k] = h
			}
			hs := &h.HistSeries
			switch m.role {
			case rBucket:
				hs.Buckets = append(hs.Buckets, Bucket{Le: r.le, Count: r.value})
			case rSum:
				hs.Sum, hs.HasSum = r.value, true
			case rCount:
				hs.Count, h.hasCount = r.value, true
			case rCreated:
				if finite(r.value) {
					hs.Created, hs.HasCreated = r.value, true
				}
			}
		}
	}
	p := &Page{}
	for e, ep := range byWorker {
		if ep == nil {
			continue // only samples of spellings not chosen
		}
		for g, n := range gaugeN[e] {
			if n > 1 && vllm.Gauges[g].Combine == vllm.Mean {
				ep.Gauges[g] /= float64(n)
				for v := range ep.SplitGauges[Gauge(g)] {
					ep.SplitGauges[Gauge(g)][v] /= float64(splitN[splitKey{int32(e), Gauge(g), v}])
				}
			}
		}
		for _, cs := range counters[e] {
			ep.Counters = append(ep.Counters, *cs)
		}
		slices.SortFunc(ep.Counters, func(a, b CounterSeries) int {
			return cmp.Or(cmp.Compare(a.Family, b.Family), strings.Compare(a.Key, b.Key))
		})
		for _, h := range hists[e] {
			if h.complete() {
				ep.Hists = append(ep.Hists, h.HistSeries)
			}
		}
		slices.SortFunc(ep.Hists, func(a, b HistSeries) int {
			return cmp.Or(cmp.Compare(a.Family, b.Family), strings.Compare(a.Key, b.Key))
		})
		p.Engines = append(p.Engines, *ep)
	}
	slices.SortFunc(p.Engines, func(a, b EnginePage) int {
		return cmp.Or(strings.Compare(a.Engine, b.Engine), strings.Compare(a.Labels, b.Labels), cmp.Compare(a.Kind, b.Kind))
	})
	return p
}

// histAsm is a histogram series being assembled from its samples.
type histAsm struct {
	HistSeries
	hasCount bool
}

// complete sorts the buckets and fills in the count or the +Inf bucket from the other, which the
// exposition format makes equal (expfmt takes a missing _count from +Inf too). It reports false
// for a series with neither: its count of observations is unknown.
func (h *histAsm) complete() bool {
	bs := h.Buckets
	slices.SortFunc(bs, func(a, b Bucket) int { return cmp.Compare(a.Le, b.Le) })
	hasInf := len(bs) > 0 && math.IsInf(bs[len(bs)-1].Le, 1)
	switch {
	case hasInf && !h.hasCount:
		h.Count = bs[len(bs)-1].Count
	case !hasInf && h.hasCount:
		h.Buckets = append(bs, Bucket{Le: math.Inf(1), Count: h.Count})
	case !hasInf:
		return false
	}
	return true
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// sortPairs sorts name, value pairs by name; pages list labels sorted already, so this is
// usually one pass.
func sortPairs(kv []string) {
	for i := 2; i < len(kv); i += 2 {
		for j := i; j >= 2 && kv[j] < kv[j-2]; j -= 2 {
			kv[j], kv[j-2] = kv[j-2], kv[j]
			kv[j+1], kv[j-1] = kv[j-1], kv[j+1]
		}
	}
}
