package step

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
)

// The property test runs propRuns random fleets by default; scripts and long soaks ask for more
// with `go test ./internal/step -run TestStepTotalsMatchReference -args -props=100000` or
// VLLMSTAT_PROPS=100000.
var propsFlag = flag.Int("props", 0, "random runs of the property tests (default: a quick fixed set)")

const propRuns = 12

func propsRuns(t *testing.T) int {
	if *propsFlag > 0 {
		return *propsFlag
	}
	if s := os.Getenv("VLLMSTAT_PROPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("VLLMSTAT_PROPS=%q: want a positive number of runs", s)
		}
		return n
	}
	return propRuns
}

// The reference below is written apart from window and step: it knows the true events of every
// engine and what each page showed, and decides from those alone which events a step must
// count. An event counts, in the step of the scrape where its series next shows a finite value,
// when the series is "tracked": the observer has a baseline for it, or knows that it started
// from zero since (an engine with _created that started after the observer last heard from its
// target). It stops being tracked when its target is removed, and becomes tracked at its first
// finite value. A NaN or ±Inf shown in place of a value is no sample: the series goes on
// counting, and what it counted meanwhile lands at its next finite value. What cannot be known is never generated: an engine
// restarts only when all its events have been counted, and an engine without _created only so
// that its next finite values are below the last ones shown (else no one could see the restart).
// An engine that no page of its target showed in a step in which the target answered, nor its
// last two pages, is forgotten at the step's close: the observer has no baseline for it any
// more, and tracks it only if it restarted since the target's last answer and _created says so.
// An engine that comes up on a target that has answered in the run without it, and that no
// page has shown yet, is tracked from the start: its target's pages are evidence that it was
// not there, and the observer counts it whole when it first sees it (a target removed meanwhile
// does not change that).

var (
	simBounds = []string{"0.25", "0.5", "1", "+Inf"}
	simObs    = []float64{0.125, 0.375, 0.75, 2} // one value per bucket, exact in binary
)

// simVals is a counter value (n[0]) or a histogram: per-bucket (not cumulative) counts and sum.
type simVals struct {
	n   [4]float64
	sum float64
}

func (v *simVals) add(o simVals) {
	for i := range v.n {
		v.n[i] += o.n[i]
	}
	v.sum += o.sum
}

func (v simVals) count() float64 { return v.n[0] + v.n[1] + v.n[2] + v.n[3] }

type simSeries struct {
	hist      bool
	val       simVals // the engine's true cumulative values
	pend      simVals // events not yet counted by any step
	tracked   bool
	base      bool    // the observer holds a finite baseline
	lastShown float64 // the counter value, or histogram count, of that baseline
	limit     float64 // > 0: keep the value (count) below it until the next finite value is shown
	inf       bool    // shows ±Inf in place of a value (its events go on)
	infSeen   bool    // a successful scrape showed the Inf
}

func (s *simSeries) size() float64 {
	if s.hist {
		return s.val.count()
	}
	return s.val.n[0]
}

type simEngine struct {
	label      string // "" for no engine label
	hasCreated bool
	up         bool
	created    float64
	series     [2]*simSeries // generation_tokens, time_to_first_token_seconds
	shown      bool          // a page of its target showed it in the open step
	everShown  bool          // a page of its target showed it in the run
	lastPage   int           // the number of the last page of its target that showed it
}

type simTarget struct {
	url      string
	present  bool
	engines  []*simEngine
	answered bool // it answered in the open step
	pages    int  // its successful pages
	lastOK   float64
	hasOK    bool // it answered once: lastOK is its last answer's time
}

// show is what a page shows of a series: its values, or a NaN or ±Inf in one of them.
type show struct {
	vals   simVals
	bad    float64 // NaN or ±Inf, 0 for none
	badPos int     // which value: 0..3 cumulative buckets, 4 sum, 5 count
}

func (e *simEngine) render(b *strings.Builder, shows [2]show) {
	lbl := `model_name="m"`
	if e.label != "" {
		lbl = fmt.Sprintf(`engine=%q,model_name="m"`, e.label)
	}
	num := func(sh show, pos int, v float64) string {
		if sh.bad != 0 && sh.badPos == pos {
			return strconv.FormatFloat(sh.bad, 'g', -1, 64)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	created := func(name string) {
		if e.hasCreated {
			fmt.Fprintf(b, "%s_created{%s} %s\n", name, lbl, strconv.FormatFloat(e.created, 'f', 3, 64))
		}
	}
	g := shows[0]
	fmt.Fprintf(b, "vllm:generation_tokens_total{%s} %s\n", lbl, num(g, 0, g.vals.n[0]))
	created("vllm:generation_tokens")
	h := shows[1]
	cum := 0.0
	for i, le := range simBounds {
		cum += h.vals.n[i]
		fmt.Fprintf(b, "vllm:time_to_first_token_seconds_bucket{%s,le=%q} %s\n", lbl, le, num(h, i, cum))
	}
	fmt.Fprintf(b, "vllm:time_to_first_token_seconds_sum{%s} %s\n", lbl, num(h, 4, h.vals.sum))
	fmt.Fprintf(b, "vllm:time_to_first_token_seconds_count{%s} %s\n", lbl, num(h, 5, cum))
	created("vllm:time_to_first_token_seconds")
}

// simStep is what the reference expects of one step.
type simStep struct {
	gen      float64
	genByWkr map[WorkerID]float64
	ttft     simVals
}

func TestStepTotalsMatchReference(t *testing.T) {
	n := propsRuns(t)
	seen := map[string]int{} // how often each kind of event happened, to show it was exercised
	for run := range n {
		if msg := propRun(uint64(run), seen); msg != "" {
			t.Fatalf("run %d (seed %d): %s", run, run, msg)
		}
	}
	t.Logf("%d runs: %v", n, seen)
	for _, k := range []string{"forget", "restart", "restart without _created", "restart past the old values", "Inf", "NaN", "failed scrape", "worker forgotten",
		"first seen late"} {
		if seen[k] == 0 {
			t.Errorf("no %q in %d runs: the test does not exercise it", k, n)
		}
	}
}

// propRun simulates one random fleet and returns what went wrong, or "". It counts the kinds of
// events it generated in seen.
func propRun(seed uint64, seen map[string]int) string {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	p := func(n int) bool { return rng.IntN(n) == 0 }
	tr := NewTracker(Options{Scalars: true, PerWorker: true})
	newEngine := func(label string, ts float64) *simEngine {
		e := &simEngine{label: label, hasCreated: rng.IntN(2) == 0, up: true, created: unix(ts - 1000)}
		for i := range e.series {
			s := &simSeries{hist: i == 1}
			s.val.n[0] = float64(rng.IntN(5000)) // what the engine counted before the run
			if s.hist {
				s.val.n[3] = float64(rng.IntN(50))
				s.val.sum = 0.125 * float64(rng.IntN(100))
			}
			e.series[i] = s
		}
		return e
	}
	targets := []*simTarget{
		{url: "http://a:8000/metrics", present: true},
		{url: "http://b:8000/metrics", present: true},
	}
	targets[0].engines = []*simEngine{newEngine("0", 0), {label: "1"}, {label: "2"}}
	targets[1].engines = []*simEngine{newEngine("", 0)}
	for _, e := range targets[0].engines[1:] {
		e.hasCreated, e.series = rng.IntN(2) == 0, [2]*simSeries{{}, {hist: true}}
	}
	exp := simStep{genByWkr: map[WorkerID]float64{}}
	var stepN int64
	const ticks = 240
	for tick := range ticks {
		ts := 0.5 * float64(tick)
		// the fleet changes
		for _, tg := range targets {
			switch {
			case tg.present && tick > 0 && p(150):
				tr.Forget(tg.url)
				seen["forget"]++
				tg.present = false
				for _, e := range tg.engines {
					// An engine that restarted after the target last answered is new since then:
					// its _created says so when the target comes back, and all it counted since
					// its restart is counted then.
					restarted := e.hasCreated && tg.hasOK && e.created > unix(tg.lastOK)
					if !e.everShown {
						continue // the observer never had it: nothing to forget
					}
					for _, s := range e.series {
						if restarted && s.tracked {
							seen["restart before a forget"]++
							s.base, s.limit, s.infSeen = false, 0, false
							continue
						}
						s.tracked, s.base, s.pend, s.limit, s.infSeen = false, false, simVals{}, 0, false
					}
				}
			case !tg.present && p(20):
				tg.present = true
			}
			for _, e := range tg.engines {
				settled := true // every event of the engine has been counted, nothing shows Inf
				for _, s := range e.series {
					settled = settled && s.pend == (simVals{}) && !s.inf
				}
				switch {
				case e.up && settled && tick > 0 && p(150):
					e.up = false
				case !e.up && tick > 0 && p(20):
					// a new life of the engine: it starts from zero
					e.up, e.created = true, unix(ts-0.1)
					seen["restart"]++
					if !e.everShown && !e.hasCreated {
						seen["first seen late"]++
					}
					burst := e.hasCreated && p(2)
					for _, s := range e.series {
						old := s.val
						s.val = simVals{}
						switch {
						case e.hasCreated:
							s.tracked = true // _created says it started since the observer last looked
						case !e.everShown && tg.hasOK:
							s.tracked = true // its target's pages did not show it: it counts whole
						case s.base && s.lastShown > 0:
							seen["restart without _created"]++
							s.limit = s.lastShown // a drop shows the restart
						}
						if burst {
							// so many events since the restart that every value is above the old one:
							// only _created shows the restart
							seen["restart past the old values"]++
							if s.hist {
								old.n[rng.IntN(4)]++
								old.sum++
							} else {
								old.n[0]++
							}
							s.val, s.pend = old, old
						}
					}
				}
				if !e.up {
					continue
				}
				for _, s := range e.series {
					switch {
					case !s.inf && s.pend == (simVals{}) && tick > 0 && p(200):
						s.inf = true
						seen["Inf"]++
					case s.inf && s.infSeen && p(3):
						// the series shows its values again, on from its last finite one
						s.inf, s.infSeen = false, false
					}
				}
			}
		}
		// events happen
		for _, tg := range targets {
			for _, e := range tg.engines {
				if !e.up || tick == 0 {
					continue
				}
				for _, s := range e.series {
					var d simVals
					if s.hist {
						for range rng.IntN(4) {
							b := rng.IntN(4)
							d.n[b]++
							d.sum += simObs[b]
						}
					} else {
						d.n[0] = float64(rng.IntN(20))
					}
					if s.limit > 0 && s.size()+d.count() >= s.limit {
						continue
					}
					s.val.add(d)
					if s.tracked {
						s.pend.add(d)
					}
				}
			}
		}
		// every present target is scraped
		for _, tg := range targets {
			if !tg.present {
				continue
			}
			if tick > 0 && p(10) {
				tr.Observe(at(ts), tg.url, nil, errTest)
				seen["failed scrape"]++
				continue
			}
			var b strings.Builder
			type shown struct {
				e     *simEngine
				shows [2]show
			}
			var shownPage []shown
			for _, e := range tg.engines {
				if !e.up {
					continue
				}
				var shows [2]show
				for i, s := range e.series {
					shows[i] = show{vals: s.val, badPos: rng.IntN(6)}
					if !s.hist {
						shows[i].badPos = 0
					}
					switch {
					case s.inf:
						shows[i].bad = math.Inf(1 - 2*rng.IntN(2))
					case p(15):
						shows[i].bad = math.NaN()
					}
				}
				e.render(&b, shows)
				shownPage = append(shownPage, shown{e, shows})
			}
			pg, err := page.ParsePage([]byte(b.String()))
			if err != nil {
				return fmt.Sprintf("generated page does not parse: %v\n%s", err, b.String())
			}
			tr.Observe(at(ts), tg.url, pg, nil)
			tg.lastOK, tg.hasOK = ts, true
			tg.answered = true
			tg.pages++
			for _, sh := range shownPage {
				sh.e.shown, sh.e.everShown, sh.e.lastPage = true, true, tg.pages
				for i, s := range sh.e.series {
					switch {
					case math.IsInf(sh.shows[i].bad, 0): // as if not shown
						s.infSeen = true
					case sh.shows[i].bad != 0: // NaN: as if not shown
						seen["NaN"]++
					default:
						if s.tracked {
							if s.hist {
								exp.ttft.add(s.pend)
							} else {
								exp.gen += s.pend.n[0]
								exp.genByWkr[WorkerID{Target: tg.url, Engine: sh.e.label}] += s.pend.n[0]
							}
						}
						s.pend, s.tracked, s.base, s.lastShown, s.limit = simVals{}, true, true, s.size(), 0
					}
				}
			}
		}
		if p(15) || tick == ticks-1 {
			stepN++
			r := tr.EndStep(stepN, at(ts))
			if msg := checkStep(&r, &exp); msg != "" {
				return fmt.Sprintf("step %d ending at %v: %s", stepN, ts, msg)
			}
			for _, tg := range targets {
				for _, e := range tg.engines {
					if e.everShown && tg.answered && !e.shown && tg.pages-e.lastPage >= 2 {
						seen["worker forgotten"]++
						restarted := e.up && e.hasCreated // since the target's last answer, which did not show it
						for _, s := range e.series {
							s.base, s.limit, s.infSeen = false, 0, false
							if !restarted {
								s.tracked, s.pend = false, simVals{}
							}
						}
					}
					e.shown = false
				}
				tg.answered = false
			}
			exp = simStep{genByWkr: map[WorkerID]float64{}}
		}
	}
	return ""
}

// checkStep compares a step record with the reference and checks that every number in it is
// finite and not negative.
func checkStep(r *Record, exp *simStep) string {
	pools := []map[string]float64{r.Metrics}
	for _, w := range r.PerWorker {
		pools = append(pools, w.Metrics)
	}
	for _, m := range pools {
		for k, v := range m {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Sprintf("%s = %v", k, v)
			}
		}
	}
	m := r.Metrics
	if got, ok := m["vllm/generation_tokens"]; got != exp.gen || exp.gen > 0 && !ok {
		return fmt.Sprintf("generation_tokens = %v (present %v), reference %v", got, ok, exp.gen)
	}
	for _, w := range r.PerWorker {
		id := WorkerID{Target: w.Target, Engine: w.Engine}
		if got := w.Metrics["vllm/generation_tokens"]; got != exp.genByWkr[id] {
			return fmt.Sprintf("%v: generation_tokens = %v, reference %v", id, got, exp.genByWkr[id])
		}
		delete(exp.genByWkr, id)
	}
	for id, v := range exp.genByWkr {
		if v != 0 {
			return fmt.Sprintf("%v: no per_worker record, reference generation_tokens %v", id, v)
		}
	}
	const k = "vllm/time_to_first_token_seconds"
	n := exp.ttft.count()
	if n == 0 {
		for _, q := range []string{"/mean", "/p50", "/p95", "/p99"} {
			if v, ok := m[k+q]; ok {
				return fmt.Sprintf("%s%s = %v, reference: no observations", k, q, v)
			}
		}
		return ""
	}
	if got, want := m[k+"/mean"], exp.ttft.sum/n; math.Abs(got-want) > 1e-9 {
		return fmt.Sprintf("%s/mean = %v, reference %v", k, got, want)
	}
	var cum []page.Bucket
	c := 0.0
	for i, le := range simBounds {
		c += exp.ttft.n[i]
		v, _ := strconv.ParseFloat(le, 64)
		cum = append(cum, page.Bucket{Le: v, Count: c})
	}
	for _, q := range []struct {
		key string
		q   float64
	}{{"/p50", 0.5}, {"/p95", 0.95}, {"/p99", 0.99}} {
		// the estimator is tested on its own (quantile_test.go): here, the buckets and sum it
		// is given are the reference's
		e, _ := boundedQuantile(q.q, cum, exp.ttft.sum, true)
		want := e.v
		if got, ok := m[k+q.key]; !ok || math.Abs(got-want) > 1e-9 {
			return fmt.Sprintf("%s%s = %v (present %v), reference %v from %v", k, q.key, got, ok, want, cum)
		}
	}
	return ""
}
