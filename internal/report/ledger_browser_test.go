package report

import (
	"math"
	"slices"
	"testing"
)

// ledgerShown is what the page draws of the ledger: the fleet balance's charts, the stacked
// chart's paths (bar, state, rectangles, any NaN), each state's share of step 2's whole bar as
// drawn, the legend, the bars' key and the tiles.
const ledgerShown = `(() => {
	const fig = document.querySelector('#metrics figure[data-chart="time/<state>_s"]');
	if (!fig) return {};
	const h = [...document.querySelectorAll('#metrics h3')].find(h => h.textContent === 'Fleet balance');
	const rects = p => (p.getAttribute('d').match(/M[^Z]*Z/g) || []).map(r => {
		const n = r.match(/-?[\d.]+/g).map(Number); // M lx top H rx V bot H lx
		return {x: n[0], h: n[3] - n[1]};
	});
	const paths = [...fig.querySelectorAll('path.stack')];
	const whole = paths.filter(p => p.dataset.bar === '');
	const first = Math.min(...whole.flatMap(p => rects(p).map(r => r.x)));
	const heights = Object.fromEntries(whole.map(p => [p.dataset.key, rects(p).filter(r => r.x === first).reduce((s, r) => s + r.h, 0)]));
	const sum = Object.values(heights).reduce((a, b) => a + b, 0);
	return {
		Balance: h ? [...h.nextElementSibling.querySelectorAll('figure')].map(f => f.dataset.chart) : [],
		Paths: paths.map(p => (p.dataset.bar || 'step') + ' ' + p.dataset.key + ' ' + p.dataset.n),
		NaN: paths.filter(p => (p.getAttribute('d') || '').includes('NaN')).length + [...document.querySelectorAll('#metrics path')].filter(p => (p.getAttribute('d') || '').includes('NaN')).length,
		Shares: Object.fromEntries(Object.entries(heights).map(([k, v]) => [k, v / sum])),
		Legend: [...fig.querySelectorAll('.legend [data-state]')].map(s => s.textContent + ' ' + s.querySelector('.swatch').style.background),
		Key: (fig.querySelector('.stack-key') || {}).textContent || '',
		Fills: [...new Set(whole.map(p => p.dataset.key + ' ' + p.style.fill))],
		States: [...document.querySelectorAll('#metrics figure[data-chart="time/<state>_fraction"] path.series')].map(p => p.dataset.key + ' ' + p.getAttribute('stroke')),
		Groups: [...document.querySelectorAll('#metrics h3')].map(h => h.textContent),
		Versions: [...document.querySelectorAll('#metrics figure[data-chart="policy/version"] path.series')].map(p => p.dataset.key + ' ' + p.dataset.n + ' ' + p.getAttribute('stroke')),
		Tiles: [...document.querySelectorAll('#headline .tile')].map(t => t.dataset.tile + ' ' + t.querySelectorAll('svg.spark path').length),
		Text: document.body.innerText.includes('NaN')};
})()`

type ledgerPage struct {
	Balance, Paths, Legend, Fills, States, Groups, Versions, Tiles []string
	NaN                                                            int
	Shares                                                         map[string]float64
	Key                                                            string
	Text                                                           bool
}

func TestBrowserLedger(t *testing.T) {
	b := browser(t)
	dir := t.TempDir()
	writeSteps(t, dir, ledgerRun(5, 3), true)
	ctx, _, errs := openDir(t, b, dir)

	got := eval[ledgerPage](t, ctx, ledgerShown)
	if !slices.Equal(got.Balance, []string{"time/<state>_s", "time/<state>_fraction"}) {
		t.Errorf("fleet balance charts %q, want the ledger's", got.Balance)
	}
	// A path per state and bar (the whole step, the rollout, the eval), with a rectangle for
	// each step where the state took time: the eval runs in step 3 only, nothing was
	// unreachable, and step 4 had no sleep.
	var want []string
	vllmStates := ledgerStates[:len(ledgerStates)-1] // the records are vLLM's: no undetermined
	for _, bar := range []string{"step", "rollout", "eval"} {
		for _, st := range vllmStates {
			n := map[string]int{"step": 4, "rollout": 4, "eval": 1}[bar]
			switch {
			case bar == "step" && (st == "asleep" || st == "waking"):
				n = 3
			case bar != "step" && st != "generating" && st != "idle", st == "unreachable":
				n = 0
			}
			want = append(want, bar+" "+st+" "+string(rune('0'+n)))
		}
	}
	if !slices.Equal(got.Paths, want) {
		t.Errorf("stacked paths %q\nwant %q", got.Paths, want)
	}
	if got.NaN != 0 || got.Text {
		t.Errorf("%d paths with NaN, NaN in the text %v", got.NaN, got.Text)
	}
	// Step 2's bar: each state's height is its share of the step's 80 engine-seconds.
	for i, st := range vllmStates {
		if want := ledgerSeconds[2][i] / 80; math.Abs(got.Shares[st]-want) > 0.01 {
			t.Errorf("%s's share of step 2's bar is %.3f, want %.3f", st, got.Shares[st], want)
		}
	}
	// The legend names every state in the fixed order, in its colour; the bars have those
	// colours; the fraction chart's lines too.
	wantLegend := []string{"generating rgb(44, 160, 44)", "idle rgb(255, 127, 14)", "asleep rgb(148, 103, 189)", "waking rgb(197, 176, 213)",
		"paused rgb(188, 189, 34)", "loading_weights rgb(31, 119, 180)", "unreachable rgb(214, 39, 40)"}
	if !slices.Equal(got.Legend, wantLegend) {
		t.Errorf("legend %q\nwant %q", got.Legend, wantLegend)
	}
	for i, f := range got.Fills {
		if i >= len(wantLegend) || f != wantLegend[i] {
			t.Errorf("bar %d filled %q, want %q", i, f, wantLegend[i])
		}
	}
	if len(got.States) == 0 || got.States[0] != "generating #2ca02c" || got.States[1] != "idle #ff7f0e" {
		t.Errorf("fraction chart's lines %q", got.States)
	}
	if got.Key != "Bars of a step, left to right: the whole step, then rollout, eval (thin)" {
		t.Errorf("bars' key %q", got.Key)
	}
	// The policy group after the throughput, the versions drawn in the steps that have them.
	if i := slices.Index(got.Groups, "Policy"); i < 1 || got.Groups[i-1] != "Throughput" {
		t.Errorf("groups %q", got.Groups)
	}
	if !slices.Equal(got.Versions, []string{"engines' min 4 #9467bd", "engines' max 4 #e377c2", "trainer 4 #111"}) {
		t.Errorf("version chart %q", got.Versions)
	}
	if !slices.Contains(got.Tiles, "generating-share 1") || !slices.Contains(got.Tiles, "stale-tokens 1") {
		t.Errorf("tiles %q, want the generating and stale-token shares with their steps' lines", got.Tiles)
	}

	// Hover over the last step: its engine-seconds, each state's and its share, the phases'.
	tip := eval[string](t, ctx, `(() => {
		const fig = document.querySelector('#metrics figure[data-chart="time/<state>_s"]'), hit = fig.querySelector('rect.hit');
		const r = hit.getBoundingClientRect();
		hit.dispatchEvent(new MouseEvent('mousemove', {clientX: r.right - 2, clientY: r.top + r.height / 2, bubbles: true}));
		const tip = fig.querySelector('.tip');
		return tip.hidden ? '' : [...tip.children].map(c => c.textContent).join('\n');
	})()`)
	wantTip := "step 5 · 80 engine-s\ngenerating: 31 (39%) · rollout 28\nidle: 29 (36%) · rollout 4\nasleep: 10 (13%) · rollout 0\n" +
		"waking: 2 (3%) · rollout 0\npaused: 3 (4%) · rollout 0\nloading_weights: 5 (6%) · rollout 0\nunreachable: 0 (0%) · rollout 0\nrollout 32 engine-s"
	if tip != wantTip {
		t.Errorf("hover tip:\n%s\nwant:\n%s", tip, wantTip)
	}
	// A click on a bar picks its step.
	step := eval[string](t, ctx, `(() => {
		const hit = document.querySelector('#metrics figure[data-chart="time/<state>_s"] rect.hit'), r = hit.getBoundingClientRect();
		hit.dispatchEvent(new MouseEvent('click', {clientX: r.left + r.width * 2.5 / 5, clientY: r.top + r.height / 2, bubbles: true}));
		return document.getElementById('timelines').dataset.step;
	})()`)
	if step != "3" {
		t.Errorf("a click in the middle of the ledger chart picks step %s, want 3", step)
	}
	eval[bool](t, ctx, `(document.querySelector('#metrics figure[data-chart="time/<state>_s"] rect.hit').dispatchEvent(new MouseEvent('mouseleave')), true)`)
	screenshot(t, ctx, "report-ledger.png")
	errs.check(t)
}
