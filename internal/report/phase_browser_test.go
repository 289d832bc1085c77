package report

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vllmstat/vllmstat/internal/step"
)

// chartsShown are the metrics section's charts: each one's title and its lines' names.
const chartsShown = `(() => Object.fromEntries([...document.querySelectorAll('#metrics figure')].map(f =>
	[f.dataset.chart, [...f.querySelectorAll('path.series')].map(p => p.dataset.key)])))()`

// phaseTableShown is the step view's phase table: its head and its rows' cells, with the step
// the view shows.
const phaseTableShown = `(() => {
	const t = document.getElementById('phase-table');
	return {Step: document.getElementById('timelines').dataset.step,
		Head: t ? [...t.querySelectorAll('th')].map(c => c.textContent) : [],
		Rows: t ? [...t.querySelectorAll('tbody tr')].map(r => [...r.cells].map(c => c.textContent)) : [],
		Phases: t ? [...t.querySelectorAll('tbody tr')].map(r => r.dataset.phase) : []};
})()`

type phaseTable struct {
	Step   string
	Head   []string
	Rows   [][]string
	Phases []string
}

// chooseStep chooses step n in the step picker.
func chooseStep(t *testing.T, ctx context.Context, n int64) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.SetValue("#step-picker", fmt.Sprint(n), chromedp.ByID),
		chromedp.Evaluate(`document.getElementById('step-picker').dispatchEvent(new Event('change'))`, nil)); err != nil {
		t.Fatal(err)
	}
}

func TestBrowserPhases(t *testing.T) {
	b := browser(t)

	t.Run("phases beside the whole step", func(t *testing.T) {
		dir := t.TempDir()
		recs := writePhasedRun(t, dir, 6, 3)
		ctx, _, errs := openDir(t, b, dir)

		charts := eval[map[string][]string](t, ctx, chartsShown)
		for title, want := range map[string][]string{
			"duration_s":              {"step", "rollout", "eval"},
			"generation_tokens_per_s": {"step", "rollout", "eval"},
			"kv_cache_usage_perc":     {"max", "mean", "rollout max", "rollout mean", "eval mean"},
			"prefix_cache_hit_rate":   {"step", "rollout"},
			"request_success":         {"length", "stop"},
		} {
			if !slices.Equal(charts[title], want) {
				t.Errorf("chart %s draws %q, want %q", title, charts[title], want)
			}
		}
		groups := eval[[]string](t, ctx, `[...document.querySelectorAll('#metrics h3')].map(h => h.textContent)`)
		if len(groups) == 0 || groups[0] != "Phases" {
			t.Errorf("groups %v, want the phases first", groups)
		}
		// The rollout's line has a point for each of steps 2..6, the eval's for steps 3 and 6.
		points := eval[map[string]int](t, ctx, `Object.fromEntries([...document.querySelectorAll('#metrics figure[data-chart="generation_tokens_per_s"] path.series')].map(p => [p.dataset.key, +p.dataset.n]))`)
		if points["step"] != 6 || points["rollout"] != 5 || points["eval"] != 2 {
			t.Errorf("points of the generation rate's lines: %v", points)
		}
		// The eval's points stand alone: a dot each, in the colour of the step's line; the lines
		// have none.
		dots := eval[[]string](t, ctx, `[...document.querySelectorAll('#metrics figure[data-chart="generation_tokens_per_s"] circle.dot, #metrics figure[data-chart="duration_s"] circle.dot')].map(c => c.getAttribute('fill'))`)
		if !slices.Equal(dots, []string{"#1f77b4", "#1f77b4", "#1f77b4", "#1f77b4"}) {
			t.Errorf("dots %q, want the eval's two in each of the two charts", dots)
		}
		// A phase's line has the colour of the whole step's line of its figure and the phase's
		// dash; the legend names the figures by colour and the phases by dash.
		styles := eval[[]string](t, ctx, `[...document.querySelectorAll('#metrics figure[data-chart="kv_cache_usage_perc"] path.series')].map(p =>
			p.dataset.key + ' ' + p.getAttribute('stroke') + ' ' + (p.getAttribute('stroke-dasharray') || 'solid'))`)
		if want := []string{"max #d62728 solid", "mean #ff7f0e solid", "rollout max #d62728 6 3", "rollout mean #ff7f0e 6 3", "eval mean #ff7f0e 1.5 2.5"}; !slices.Equal(styles, want) {
			t.Errorf("KV usage lines %q, want %q", styles, want)
		}
		legends := eval[map[string][]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('#metrics figure')].map(f =>
			[f.dataset.chart, [...f.querySelectorAll('.legend > span')].map(s => (s.classList.contains('style-item') ? '~' : '') + s.textContent)]))`)
		for title, want := range map[string][]string{
			"duration_s":              {"~whole step", "~rollout", "~eval"},
			"kv_cache_usage_perc":     {"max", "mean", "~whole step", "~rollout", "~eval"},
			"prefix_cache_hit_rate":   {"~whole step", "~rollout"},
			"request_success":         {"length", "stop"},
			"generation_tokens_per_s": {"~whole step", "~rollout", "~eval"},
			// The eval's p99 has a colour of its own.
			"time_to_first_token_seconds": {"p50", "p95", "p99", "~whole step", "~rollout", "~eval"},
		} {
			if !slices.Equal(legends[title], want) {
				t.Errorf("legend of %s: %q, want %q", title, legends[title], want)
			}
		}

		// The page opens on step 6: its phases below the whole step, with their figures.
		got := eval[phaseTable](t, ctx, phaseTableShown)
		r6 := recs[5]
		// Step 6 has no preemptions (testStep leaves them out of every third step): no column.
		wantHead := []string{"phase", "seconds", "of step", "open", "gen tok/s", "KV mean", "KV max", "running mean", "hit rate", "TTFT p50 s"}
		if got.Step != "6" || !slices.Equal(got.Head, wantHead) || !slices.Equal(got.Phases, []string{"", "rollout", "eval"}) {
			t.Fatalf("phase table of step 6: %+v\nwant head %q", got, wantHead)
		}
		js := func(v float64) string {
			return eval[string](t, ctx, fmt.Sprintf(`String(+(%v).toPrecision(5))`, round(v)))
		}
		rollout := r6.Phases["rollout"].Metrics
		for i, want := range [][]string{
			{"whole step", "20", "100%", "", js(r6.Metrics["vllm/generation_tokens_per_s"]), js(r6.Metrics["vllm/kv_cache_usage_perc/mean"])},
			{"rollout", "8", "40%", "once", js(rollout["vllm/generation_tokens_per_s"]), js(rollout["vllm/kv_cache_usage_perc/mean"])},
			{"eval", "2", "10%", "2 times", "3000", "0.3", "–", "–", "–", "–"},
		} {
			if !slices.Equal(got.Rows[i][:len(want)], want) {
				t.Errorf("phase table row %d: %q, want it to start %q", i, got.Rows[i], want)
			}
		}
		screenshot(t, ctx, "report-phases.png")

		// Step 2 has the rollout alone, step 1 no phase and no table.
		chooseStep(t, ctx, 2)
		if got := eval[phaseTable](t, ctx, phaseTableShown); got.Step != "2" || !slices.Equal(got.Phases, []string{"", "rollout"}) {
			t.Errorf("phase table of step 2: %+v", got)
		}
		chooseStep(t, ctx, 1)
		if got := eval[phaseTable](t, ctx, phaseTableShown); got.Step != "1" || len(got.Rows) != 0 {
			t.Errorf("step 1 has no phases, but shows %+v", got)
		}

		// The table of steps has each phase's time and its keys.
		type head struct{ Fixed, Keys, Names []string }
		hd := eval[head](t, ctx, `({Fixed: [...document.querySelectorAll('#steps-table thead tr.charts th[rowspan]')].map(h => h.textContent),
			Keys: [...document.querySelectorAll('#steps-table thead tr.stats th')].map(h => h.dataset.key),
			Names: [...document.querySelectorAll('#steps-table thead tr.stats th')].map(h => h.textContent)})`)
		// A phase's key is a column beside the whole step's, named as its line is.
		i := slices.Index(hd.Keys, "vllm/rollout/generation_tokens_per_s")
		if len(hd.Fixed) != 8 || !slices.Equal(hd.Fixed[6:], []string{"rollout s", "eval s"}) || i < 1 ||
			!slices.Equal(hd.Keys[i-1:i+2], []string{"vllm/generation_tokens_per_s", "vllm/rollout/generation_tokens_per_s", "vllm/eval/generation_tokens_per_s"}) ||
			!slices.Equal(hd.Names[i-1:i+2], []string{"step", "rollout", "eval"}) {
			t.Errorf("table head %+v", hd)
		}
		row := eval[[]string](t, ctx, `[...document.querySelector('#steps-table tbody tr[data-step="3"]').cells].map(c => c.textContent)`)
		if len(row) != len(hd.Fixed)+len(hd.Keys) || row[6] != "8" || row[7] != "2" {
			t.Errorf("step 3's row %q: want its rollout's 8 s and eval's 2 s", row)
		}
		errs.check(t)
	})

	t.Run("phase names and keys stay text", func(t *testing.T) {
		dir := t.TempDir()
		r := testStep(1, 2, 10)
		bad := `x<img src=x onerror="window.__xss=1">`
		r.Phases = map[string]*step.Phase{
			bad:         {DurationS: 1, Intervals: 1, Metrics: map[string]float64{`vllm/<img src=y onerror="window.__xss=2">`: 1, "vllm/generation_tokens_per_s": 5}},
			"__proto__": {DurationS: 2, Intervals: 1, Metrics: map[string]float64{"vllm/generation_tokens_per_s": 6}},
			`</script><script>window.__xss=3</script>`: {DurationS: 3, Intervals: 1, Metrics: map[string]float64{"vllm/generation_tokens_per_s": 7}},
		}
		writeSteps(t, dir, []*step.Record{r}, true)
		ctx, _, errs := openDir(t, b, dir)
		type shown struct {
			XSS    any
			Images int
			Names  []string
			Table  phaseTable
		}
		got := eval[shown](t, ctx, `({XSS: window.__xss || null, Images: document.querySelectorAll('img, #app script').length,
			Names: [...document.querySelectorAll('#metrics figure[data-chart="generation_tokens_per_s"] path.series')].map(p => p.dataset.key),
			Table: `+phaseTableShown+`})`)
		if got.XSS != nil || got.Images != 0 {
			t.Fatalf("markup in a phase ran: %+v", got)
		}
		wantNames := []string{"step", "</script><script>window.__xss=3</script>", "__proto__", bad}
		if !slices.Equal(got.Names, wantNames) {
			t.Errorf("lines %q, want %q", got.Names, wantNames)
		}
		if !slices.Equal(got.Table.Phases, append([]string{""}, wantNames[1:]...)) || got.Table.Rows[3][0] != bad || got.Table.Rows[2][4] != "6" {
			t.Errorf("phase table %+v", got.Table)
		}
		head := eval[string](t, ctx, `document.querySelector('#steps-table thead').textContent`)
		if !strings.Contains(head, bad+" s") || !strings.Contains(head, `<img src=y onerror="window.__xss=2">`) {
			t.Errorf("the table's head lacks the phase and its key as text: %q", head)
		}
		errs.check(t)
	})

	// steps.jsonl of two runs that continue each other: steps 1-3 of a run without phases,
	// then steps 4-5 of a run resumed an hour later, with phases, with or without timelines.
	for _, timelines := range []bool{true, false} {
		t.Run(fmt.Sprintf("a resumed run, timelines %v", timelines), func(t *testing.T) {
			dir := t.TempDir()
			var first, second []*step.Record
			for n := int64(1); n <= 5; n++ {
				r := testStep(n, 3, 40)
				if n <= 3 {
					first = append(first, r)
					continue
				}
				addTestPhases(r)
				r.Start, r.End = r.Start.Add(time.Hour), r.End.Add(time.Hour)
				second = append(second, r)
			}
			writeSteps(t, dir, first, true)
			writeSteps(t, dir, second, timelines)
			ctx, _, errs := openDir(t, b, dir)

			type shown struct {
				Summary            string
				Options, Rows      []string
				Step, Picked       string
				Ticks              []string
				Lines, Unordered   int
				Left, Right, Whole int
			}
			// Every line's points run left to right; the generation rate's, which every step
			// has, from the left edge of the axis (x 58) to its right edge (560 - 12).
			got := eval[shown](t, ctx, `(() => {
				const xs = p => (p.getAttribute('d').match(/[ML][-\d.]+/g) || []).map(s => +s.slice(1));
				const lines = [...document.querySelectorAll('#metrics path.series')];
				const gen = xs(document.querySelector('#metrics figure[data-chart="generation_tokens_per_s"] path.series'));
				return {Summary: document.getElementById('summary').textContent,
					Options: [...document.querySelectorAll('#step-picker option')].map(o => o.value),
					Rows: [...document.querySelectorAll('#steps-table tbody tr')].map(r => r.dataset.step),
					Step: document.getElementById('timelines').dataset.step, Picked: document.getElementById('step-picker').value,
					Ticks: [...document.querySelector('#metrics figure svg').querySelectorAll('.axes text[text-anchor="middle"]:not(.label)')].map(t => t.textContent),
					Lines: lines.length, Unordered: lines.filter(p => xs(p).some((x, i, a) => i > 0 && !(x > a[i - 1]))).length,
					Left: Math.round(gen[0]), Right: Math.round(gen[gen.length - 1]), Whole: gen.length};
			})()`)
			steps := []string{"1", "2", "3", "4", "5"}
			if !strings.HasPrefix(got.Summary, "5 steps (1–5, from 2025-06-01T12:01:00Z)") || !slices.Equal(got.Options, steps) || !slices.Equal(got.Rows, steps) {
				t.Errorf("steps: %+v", got)
			}
			if !slices.Equal(got.Ticks, steps) || got.Lines == 0 || got.Unordered != 0 || got.Left != 58 || got.Right != 548 || got.Whole != 5 {
				t.Errorf("the charts do not share one axis of steps 1-5: %+v", got)
			}
			// It opens on the last step, the resumed run's, with its phases.
			if got.Step != "5" || got.Picked != "5" {
				t.Errorf("the report opens on step %s (picker %s), want 5", got.Step, got.Picked)
			}
			if pt := eval[phaseTable](t, ctx, phaseTableShown); !slices.Equal(pt.Phases, []string{"", "rollout"}) {
				t.Errorf("step 5's phases: %+v", pt)
			}
			// The previous step is the resumed run's first, and the one before it the first run's last.
			eval[bool](t, ctx, `(document.getElementById('prev-step').click(), document.getElementById('prev-step').click(), true)`)
			if s := eval[string](t, ctx, `document.getElementById('timelines').dataset.step`); s != "3" {
				t.Errorf("two steps back from step 5 is step %s", s)
			}
			if !timelines {
				screenshot(t, ctx, "report-resumed.png")
			}
			errs.check(t)
		})
	}
}
