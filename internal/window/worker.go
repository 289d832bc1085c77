package window

// Worker keeps what one engine's previous successful scrape said, to turn the next one into
// increases. A Worker is owned by one goroutine.
type Worker struct {
	seen     bool
	counters map[seriesID]counterState
	hists    map[seriesID]*histState
}

// seriesID names a series of one worker: its family and its other labels.
type seriesID struct {
	fam int
	key string
}

type counterState struct {
	value, created float64
	hasCreated     bool
}

type histState struct {
	buckets    []Bucket
	sum, count float64
	created    float64
	hasCreated bool
}

// Increase is what changed in one engine between its previous successful scrape and this one.
type Increase struct {
	Counters   [NumCounters]float64
	HasCounter [NumCounters]bool  // the family was on the page and an increase could be computed
	Success    map[string]float64 // request_success by finished_reason
	Hists      [NumHists]*HistDelta
}

// HistDelta is the increase of a histogram: cumulative bucket counts, sum and count.
type HistDelta struct {
	Buckets    []Bucket
	Sum, Count float64
}

// NewWorker returns a worker that has seen nothing yet.
func NewWorker() *Worker {
	return &Worker{counters: map[seriesID]counterState{}, hists: map[seriesID]*histState{}}
}

// Seen reports whether the worker has had a successful scrape.
func (w *Worker) Seen() bool { return w.seen }

// Observe takes an engine's samples from a successful scrape and returns the increases since the
// previous one. A worker seen for the first time contributes only the series whose _created is
// after since (Unix seconds): the engine started after that moment, so all of its count is new;
// otherwise its first scrape is only the baseline.
//
// A counter that went down, or whose _created changed, was reset by an engine restart, and its
// increase is the new value (what Prometheus' increase() does, plus the _created check that
// catches a restart whose counter has already passed its old value). Never clamped to zero.
func (w *Worker) Observe(p *EnginePage, since float64) Increase {
	var inc Increase
	first := !w.seen
	w.seen = true
	for i := range p.Counters {
		cs := &p.Counters[i]
		k := seriesID{int(cs.Family), cs.Key}
		old, had := w.counters[k]
		w.counters[k] = counterState{value: cs.Value, created: cs.Created, hasCreated: cs.HasCreated}
		var d float64
		switch {
		case first:
			if !cs.HasCreated || cs.Created <= since {
				continue
			}
			d = cs.Value
		case !had:
			d = cs.Value // a series that appeared since the last scrape started from zero
		case cs.Value < old.value || cs.HasCreated && old.hasCreated && cs.Created != old.created:
			d = cs.Value
		default:
			d = cs.Value - old.value
		}
		inc.Counters[cs.Family] += d
		inc.HasCounter[cs.Family] = true
		if cs.Family == RequestSuccess {
			if inc.Success == nil {
				inc.Success = map[string]float64{}
			}
			inc.Success[cs.Reason] += d
		}
	}
	for i := range p.Hists {
		hs := &p.Hists[i]
		k := seriesID{int(hs.Family), hs.Key}
		old := w.hists[k]
		w.hists[k] = &histState{buckets: hs.Buckets, sum: hs.Sum, count: hs.Count, created: hs.Created, hasCreated: hs.HasCreated}
		var d *HistDelta
		switch {
		case first:
			if !hs.HasCreated || hs.Created <= since {
				continue
			}
			d = fullHist(hs)
		case old == nil:
			d = fullHist(hs)
		case hs.Count < old.count || hs.HasCreated && old.hasCreated && hs.Created != old.created || !sameLayout(hs.Buckets, old.buckets):
			d = fullHist(hs)
		default:
			d = &HistDelta{Sum: hs.Sum - old.sum, Count: hs.Count - old.count, Buckets: make([]Bucket, len(hs.Buckets))}
			for j, b := range hs.Buckets {
				d.Buckets[j] = Bucket{Le: b.Le, Count: b.Count - old.buckets[j].Count}
			}
		}
		inc.Hists[hs.Family] = addHist(inc.Hists[hs.Family], d)
	}
	return inc
}

func fullHist(hs *HistSeries) *HistDelta {
	return &HistDelta{Sum: hs.Sum, Count: hs.Count, Buckets: append([]Bucket(nil), hs.Buckets...)}
}

func sameLayout(a, b []Bucket) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Le != b[i].Le {
			return false
		}
	}
	return true
}

// addHist adds d into acc (either may be nil) by bucket bound and returns the sum.
func addHist(acc, d *HistDelta) *HistDelta {
	if acc == nil {
		return d
	}
	if d == nil {
		return acc
	}
	acc.Sum += d.Sum
	acc.Count += d.Count
	acc.Buckets = MergeBuckets(acc.Buckets, d.Buckets)
	return acc
}

// MergeBuckets adds two cumulative bucket lists by upper bound. A bound missing from one list
// takes that list's count at the next lower bound (the cumulative count there), so merging
// histograms with different layouts stays cumulative.
func MergeBuckets(a, b []Bucket) []Bucket {
	if sameLayout(a, b) {
		out := make([]Bucket, len(a))
		for i := range a {
			out[i] = Bucket{Le: a[i].Le, Count: a[i].Count + b[i].Count}
		}
		return out
	}
	out := make([]Bucket, 0, len(a)+len(b))
	i, j := 0, 0
	var ca, cb float64 // cumulative counts at the last bound passed in each list
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || i < len(a) && a[i].Le < b[j].Le:
			ca = a[i].Count
			out = append(out, Bucket{Le: a[i].Le, Count: ca + cb})
			i++
		case i >= len(a) || b[j].Le < a[i].Le:
			cb = b[j].Count
			out = append(out, Bucket{Le: b[j].Le, Count: ca + cb})
			j++
		default:
			ca, cb = a[i].Count, b[j].Count
			out = append(out, Bucket{Le: a[i].Le, Count: ca + cb})
			i++
			j++
		}
	}
	return out
}
