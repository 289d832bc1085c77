package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// tile is one figure of the headline: a label, the figure as text, a line that says what it is
// over, and the steps' values it comes from for a small chart (a line each; Frac when they are
// fractions).
type tile struct {
	ID    string   `json:"id"`
	Label string   `json:"label"`
	Value string   `json:"value"`
	Sub   string   `json:"sub,omitempty"`
	Spark []values `json:"spark,omitempty"`
	Frac  bool     `json:"frac,omitempty"`
}

// The names the headline reads, without prefix.
var (
	nameHitRate     = vllm.PrefixHitRate.Name
	nameHits        = vllm.Counters[vllm.PrefixHits].Name
	nameQueries     = vllm.Counters[vllm.PrefixQueries].Name
	namePreemptions = vllm.Counters[vllm.Preemptions].Name
	nameGenTokens   = vllm.Counters[vllm.GenerationTokens].Name
	nameGenRate     = vllm.Rate{Of: vllm.GenerationTokens}.Name()
	namePromptRate  = vllm.Rate{Of: vllm.PromptTokens}.Name()
	namePromptTok   = vllm.Counters[vllm.PromptTokens].Name
	nameTTFTp50     = vllm.Hists[vllm.TTFT].Name + "/" + vllm.StatP50
	nameTTFTp95     = vllm.Hists[vllm.TTFT].Name + "/" + vllm.StatP95
)

// headline sums up the run of d, whose keys and values are built from recs: the steps, the
// workers, the prefix-cache hit rate, the preemptions, the generation throughput, the engines'
// generating share and stale-token share, the time to first token and the straggler tail. A figure whose keys no step has is left out. Figures
// over the whole run are exact where the records allow it (the hit rate is all hits over all
// queries, the throughput all tokens over all the steps' time); quantiles cannot be combined
// across steps, so TTFT is the median of the steps' own.
func headline(d *pageData, recs []*step.Record) []tile {
	n := len(recs)
	if n == 0 {
		return []tile{}
	}
	var out []tile

	total := 0.0
	for _, r := range recs {
		total += r.DurationS
	}
	span := fmt.Sprintf("steps %d–%d", recs[0].Step, recs[n-1].Step)
	if n == 1 {
		span = fmt.Sprintf("step %d", recs[0].Step)
	}
	out = append(out, tile{ID: "steps", Label: "Steps", Value: strconv.Itoa(n), Sub: span + " · " + seconds(total) + " in steps"})

	lo, hi, failed := recs[0].Workers, recs[0].Workers, 0
	for _, r := range recs {
		lo, hi = min(lo, r.Workers), max(hi, r.Workers)
		failed += r.Scrapes.Failed
	}
	sub := "in every step"
	if lo != hi {
		sub = fmt.Sprintf("%d–%d across steps", lo, hi)
	}
	if failed > 0 {
		sub += " · " + plural(failed, "failed scrape")
	}
	out = append(out, tile{ID: "workers", Label: "Workers", Value: strconv.Itoa(recs[n-1].Workers), Sub: sub})

	if hits, queries := d.column(nameHits), d.column(nameQueries); hits != nil && queries != nil {
		var h, q float64
		for j := range n {
			if !math.IsNaN(hits[j]) && !math.IsNaN(queries[j]) {
				h += hits[j]
				q += queries[j]
			}
		}
		if q > 0 && isFinite(h/q) {
			t := tile{ID: "hit-rate", Label: "Prefix-cache hit rate", Value: percent(h / q), Sub: "all hits / all queries (" + count(q) + " tokens)", Frac: true}
			if rate := d.column(nameHitRate); rate != nil {
				t.Spark = []values{rate}
				if v, ok := last(rate); ok {
					t.Sub += " · last step " + percent(v)
				}
			}
			out = append(out, t)
		}
	} else if rate := d.column(nameHitRate); rate != nil {
		if v, ok := last(rate); ok {
			out = append(out, tile{ID: "hit-rate", Label: "Prefix-cache hit rate", Value: percent(v), Sub: "last step", Spark: []values{rate}, Frac: true})
		}
	}

	if pre := d.column(namePreemptions); pre != nil {
		sum, with, steps := 0.0, 0, 0
		for _, v := range pre {
			if math.IsNaN(v) {
				continue
			}
			steps++
			sum += v
			if v > 0 {
				with++
			}
		}
		t := tile{ID: "preemptions", Label: "Preemptions", Value: count(sum), Sub: fmt.Sprintf("in %d of %d steps", with, steps), Spark: []values{pre}}
		if v, ok := last(pre); ok {
			t.Sub += " · last step " + count(v)
		}
		out = append(out, t)
	}

	if gen, ok := d.throughput(nameGenTokens, nameGenRate, ""); ok {
		t := tile{ID: "throughput", Label: "Generation throughput", Value: perSecond(gen), Sub: "all tokens / all steps' time"}
		if rate := d.column(nameGenRate); rate != nil {
			t.Spark = []values{rate}
		}
		if p, ok := d.throughput(namePromptTok, namePromptRate, ""); ok {
			t.Sub += " · prompt " + perSecond(p)
		}
		if r, ok := d.throughput("", nameGenRate, rolloutPhase); ok {
			t.Sub += " · in the rollout " + perSecond(r)
		}
		out = append(out, t)
	}
	if t, ok := generatingTile(d); ok {
		out = append(out, t)
	}
	if t, ok := staleTile(d); ok {
		out = append(out, t)
	}
	if t, ok := mfuTile(d); ok {
		out = append(out, t)
	}

	var stats, meds, lasts []string
	var spark []values
	for _, q := range []struct{ stat, name string }{{vllm.StatP50, nameTTFTp50}, {vllm.StatP95, nameTTFTp95}} {
		col := d.column(q.name)
		m, ok := median(col)
		if !ok {
			continue
		}
		v, _ := last(col)
		stats, meds, lasts = append(stats, q.stat), append(meds, seconds(m)), append(lasts, seconds(v))
		spark = append(spark, col)
	}
	if len(stats) > 0 {
		out = append(out, tile{ID: "ttft", Label: "TTFT " + strings.Join(stats, " / "), Value: strings.Join(meds, " / "),
			Sub: "median of the steps' · last step " + strings.Join(lasts, " / "), Spark: spark})
	}

	if tail := d.column(step.NameStragglerTail); tail != nil {
		var xs, ys []float64
		for j, v := range tail {
			if !math.IsNaN(v) {
				xs = append(xs, float64(d.Steps[j]))
				ys = append(ys, v)
			}
		}
		if len(ys) > 0 {
			t := tile{ID: "straggler-tail", Label: "Straggler tail", Value: seconds(ys[0]), Spark: []values{tail}}
			if len(ys) == 1 {
				t.Sub = "one step"
			} else {
				// The figures are the fitted line's at the first and last step, so that they
				// move as the word says: a first step with nothing to wait for (42.5 µs) before
				// a tail that falls from over a second is falling, not a rise to the last value.
				f := trend(xs, ys)
				t.Value = seconds(f.from) + " → " + seconds(f.to)
				t.Sub = "fit, first → last step · " + f.word
				if f.word != "flat" {
					sign := "+"
					if f.slope < 0 {
						sign = "−"
					}
					t.Sub += fmt.Sprintf(", %s%s per step", sign, seconds(math.Abs(f.slope)))
				}
				t.Sub += fmt.Sprintf(" (over %d steps) · last step %s", len(ys), seconds(ys[len(ys)-1]))
			}
			out = append(out, t)
		}
	}
	return out
}

// column is the values of the whole step's key name (without prefix) in every step, nil when
// no key has that name.
func (d *pageData) column(name string) values {
	for i, k := range d.Keys {
		if d.KeyPhase != nil && d.KeyPhase[i] != "" {
			continue
		}
		if k == name || strings.HasSuffix(k, "/"+name) {
			return d.Values[i]
		}
	}
	return nil
}

// phaseColumn is column for phase's values of the whole step's key name.
func (d *pageData) phaseColumn(phase, name string) values {
	for i := range d.Keys {
		if d.KeyPhase != nil && d.KeyPhase[i] == phase && (d.KeyOf[i] == name || strings.HasSuffix(d.KeyOf[i], "/"+name)) {
			return d.Values[i]
		}
	}
	return nil
}

// throughput is a counter's increase over the time of the steps that have it, in a phase's
// time for a phase: its total (name) where the record has one, else its rate times the time.
func (d *pageData) throughput(name, rateName, phase string) (float64, bool) {
	dur := d.Dur
	var tot, rate values
	if phase == "" {
		tot, rate = d.column(name), d.column(rateName)
	} else {
		i := slices.IndexFunc(d.Phases, func(p pagePhase) bool { return p.Name == phase })
		if i < 0 {
			return 0, false
		}
		dur = d.Phases[i].Dur
		rate = d.phaseColumn(phase, rateName)
	}
	var sum, secs float64
	for j := range dur {
		if math.IsNaN(dur[j]) || dur[j] <= 0 {
			continue
		}
		switch {
		case tot != nil && !math.IsNaN(tot[j]):
			sum += tot[j]
		case rate != nil && !math.IsNaN(rate[j]):
			sum += rate[j] * dur[j]
		default:
			continue
		}
		secs += dur[j]
	}
	if secs <= 0 || !isFinite(sum/secs) {
		return 0, false
	}
	return sum / secs, true
}

// fit is a least-squares line through a figure's steps: whether it is "rising", "falling" or
// "flat", its slope per step, and its values at the first and last step (not below 0: a tail
// or a time is never negative).
type fit struct {
	word            string
	slope, from, to float64
}

// trend fits a line to the points by least squares: "rising" or "falling" when it moves by
// more than a tenth of the values' mean size over the steps, else "flat".
func trend(xs, ys []float64) fit {
	n := float64(len(xs))
	var mx, my, size float64
	for i := range xs {
		mx += xs[i] / n
		my += ys[i] / n
		size += math.Abs(ys[i]) / n
	}
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return fit{word: "flat", from: my, to: my}
	}
	slope := sxy / sxx
	f := fit{word: "flat", slope: slope,
		from: max(0, my+slope*(xs[0]-mx)), to: max(0, my+slope*(xs[len(xs)-1]-mx))}
	change := slope * (xs[len(xs)-1] - xs[0])
	switch {
	case !isFinite(change) || math.Abs(change) <= 0.1*size:
	case change > 0:
		f.word = "rising"
	default:
		f.word = "falling"
	}
	return f
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// last is the last value of vs that is not NaN.
func last(vs values) (float64, bool) {
	for i := len(vs) - 1; i >= 0; i-- {
		if !math.IsNaN(vs[i]) {
			return vs[i], true
		}
	}
	return 0, false
}

// median is the median of the values of vs that are not NaN.
func median(vs values) (float64, bool) {
	var xs []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m], true
	}
	return (xs[m-1] + xs[m]) / 2, true
}

// sig writes v with three significant digits, without a trailing ".0".
func sig(v float64) string { return strconv.FormatFloat(round3(v), 'f', -1, 64) }

func round3(v float64) float64 {
	if v == 0 || !isFinite(v) {
		return v
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	return r
}

// count writes a count: whole numbers up to a million with thousands separated, larger ones
// and fractions with three significant digits.
func count(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return sig(v/1e9) + "G"
	case a >= 1e6:
		return sig(v/1e6) + "M"
	case v != math.Trunc(v):
		return sig(v)
	}
	s := strconv.FormatFloat(a, 'f', 0, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if v < 0 {
		s = "−" + s
	}
	return s
}

// perSecond writes tokens per second with three significant digits and k or M.
func perSecond(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return sig(v/1e6) + "M\u00a0tok/s"
	case a >= 1e3:
		return sig(v/1e3) + "k\u00a0tok/s"
	}
	return sig(v) + "\u00a0tok/s"
}

// percent writes a fraction as a percentage with one decimal.
func percent(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }

// seconds writes a time with three significant digits in s, ms or µs, the unit joined to the
// number by a no-break space (as in perSecond), so that a tile breaks between figures only.
func seconds(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0\u00a0s"
	case a < 1e-3:
		return sig(v*1e6) + "\u00a0µs"
	case a < 1:
		return sig(v*1e3) + "\u00a0ms"
	}
	return sig(v) + "\u00a0s"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
