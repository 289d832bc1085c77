package report

import (
	"strconv"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
)

// TestBrowserChartsReadable checks what makes the charts readable: a hit rate of 93-95% drawn
// on an axis zoomed to it (in the headline and in its chart) and labelled, the figures'
// colours and the phases' line styles in two legends, and a phase every few steps drawn as a
// line over the steps between.
func TestBrowserChartsReadable(t *testing.T) {
	b := browser(t)

	// hitRun writes a run of 8 steps whose hit rates are rates[step % len(rates)].
	hitRun := func(t *testing.T, rates []float64) string {
		dir := t.TempDir()
		var recs []*step.Record
		for n := int64(1); n <= 8; n++ {
			r := testStep(n, 3, 10)
			rate := rates[int(n)%len(rates)]
			r.Metrics["vllm/prefix_cache_hit_rate"] = rate
			r.Metrics["vllm/prefix_cache_hits"] = rate * r.Metrics["vllm/prefix_cache_queries"]
			recs = append(recs, r)
		}
		writeSteps(t, dir, recs, false)
		return dir
	}
	type axis struct {
		Spark, Plot float64  // the height the lines span, of the spark's and of the chart's plot
		Ticks       []string // the chart's y axis
		SparkAxis   string   // the spark's axis, as labelled
		Label       string   // the chart's y axis label
	}
	const shownAxis = `(() => {
		const ys = p => (p.getAttribute('d').match(/[ML][-\d.]+ [-\d.]+/g) || []).map(s => +s.split(' ')[1]);
		const span = a => Math.max(...a) - Math.min(...a);
		const fig = document.querySelector('#metrics figure[data-chart="prefix_cache_hit_rate"]');
		const tile = document.querySelector('#headline .tile[data-tile="hit-rate"]');
		return {Spark: span(ys(tile.querySelector('svg.spark path'))) / 30,
			Plot: span(ys(fig.querySelector('path.series'))) / (220 - 10 - 32),
			Ticks: [...fig.querySelectorAll('.axes text[text-anchor="end"]')].map(t => t.textContent),
			SparkAxis: (tile.querySelector('.spark-axis') || {}).textContent || '',
			Label: fig.querySelector('.axes text.label[transform]').textContent};
	})()`
	ticksWithin := func(t *testing.T, ticks []string, lo, hi float64) {
		t.Helper()
		if len(ticks) < 2 {
			t.Errorf("y ticks %q: want an axis", ticks)
		}
		for _, s := range ticks {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v < lo || v > hi {
				t.Errorf("y ticks %q: want them within %g-%g", ticks, lo, hi)
				return
			}
		}
	}
	// sparkAxis reads "axis 92.7–95.3%" as fractions.
	sparkAxis := func(t *testing.T, s string) (float64, float64) {
		t.Helper()
		r, ok := strings.CutPrefix(strings.TrimSuffix(s, "%"), "axis ")
		from, to, ok2 := strings.Cut(r, "–")
		a, err1 := strconv.ParseFloat(from, 64)
		b, err2 := strconv.ParseFloat(to, 64)
		if !ok || !ok2 || err1 != nil || err2 != nil {
			t.Fatalf("spark axis %q: want axis LO–HI%%", s)
		}
		return a / 100, b / 100
	}

	t.Run("hit rate of 93-95% zoomed", func(t *testing.T) {
		ctx, _, errs := openDir(t, b, hitRun(t, []float64{0.93, 0.94, 0.95, 0.935}))
		got := eval[axis](t, ctx, shownAxis)
		if got.Spark < 0.5 || got.Plot < 0.5 {
			t.Errorf("the hit rate's 93-95%% spans %.0f%% of the spark's height and %.0f%% of the chart's: want the axes zoomed to it", 100*got.Spark, 100*got.Plot)
		}
		ticksWithin(t, got.Ticks, 0.85, 1)
		if lo, hi := sparkAxis(t, got.SparkAxis); lo < 0.85 || lo > 0.93 || hi < 0.95 || hi > 1 {
			t.Errorf("spark axis %q: want it around 93-95%%", got.SparkAxis)
		}
		if got.Label == "" {
			t.Errorf("the hit rate chart's y axis has no label")
		}
		screenshot(t, ctx, "report-hit-rate-zoomed.png")
		errs.check(t)
	})

	t.Run("hit rate up to 100% clipped to 1", func(t *testing.T) {
		ctx, _, errs := openDir(t, b, hitRun(t, []float64{0.98, 0.99, 1}))
		got := eval[axis](t, ctx, shownAxis)
		ticksWithin(t, got.Ticks, 0.9, 1)
		if lo, hi := sparkAxis(t, got.SparkAxis); lo < 0.9 || lo > 0.98 || hi != 1 {
			t.Errorf("spark axis %q: want it from below 98%% to 100%%", got.SparkAxis)
		}
		errs.check(t)
	})

	t.Run("figures and phases in two legends", func(t *testing.T) {
		dir := t.TempDir()
		writePhasedRun(t, dir, 6, 3)
		ctx, _, errs := openDir(t, b, dir)
		// Each legend row of a chart: its entries, "~" before one named by a line style.
		got := eval[map[string][][]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('#metrics figure')].map(f =>
			[f.dataset.chart, [...f.querySelectorAll('.legend')].map(l => [...l.children].map(s => (s.classList.contains('style-item') ? '~' : '') + s.textContent))]))`)
		for chart, want := range map[string]string{
			"kv_cache_usage_perc":         "[[max mean] [~whole step ~rollout ~eval]]",
			"time_to_first_token_seconds": "[[p50 p95 p99] [~whole step ~rollout ~eval]]",
			"duration_s":                  "[[~whole step ~rollout ~eval]]",
			"request_success":             "[[length stop]]",
		} {
			if s := fmtRows(got[chart]); s != want {
				t.Errorf("legends of %s: %s, want %s", chart, s, want)
			}
		}
		screenshot(t, ctx, "report-legends.png")
		errs.check(t)
	})

	t.Run("a phase every third step drawn as a line", func(t *testing.T) {
		dir := t.TempDir()
		writePhasedRun(t, dir, 9, 3) // eval in steps 3, 6 and 9
		ctx, _, errs := openDir(t, b, dir)
		type line struct {
			D string
			N int
		}
		got := eval[map[string]line](t, ctx, `Object.fromEntries([...document.querySelectorAll('#metrics figure[data-chart="generation_tokens_per_s"] path.series')].map(p =>
			[p.dataset.key, {D: p.getAttribute('d'), N: +p.dataset.n}]))`)
		for key, n := range map[string]int{"step": 9, "rollout": 8, "eval": 3} {
			l := got[key]
			if l.N != n || strings.Count(l.D, "M") != 1 || strings.Count(l.D, "L") != n-1 {
				t.Errorf("%s line %+v: want one line through its %d points", key, l, n)
			}
		}
		errs.check(t)
	})
}

// fmtRows writes a chart's legend rows as [[a b] [c]].
func fmtRows(rows [][]string) string {
	var out []string
	for _, r := range rows {
		out = append(out, "["+strings.Join(r, " ")+"]")
	}
	return "[" + strings.Join(out, " ") + "]"
}
