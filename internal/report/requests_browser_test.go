package report

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// requestsShown is what the page draws of the Requests group and the MFU: the group's charts,
// the split's paths (bar, source, rectangles, any NaN), each source's share of step 2's whole
// bar as drawn, the legend, a hover tip over the last step, the throughput group's charts and
// the MFU tile.
const requestsShown = `(() => {
	const group = name => {
		const h = [...document.querySelectorAll('#metrics h3')].find(h => h.textContent === name);
		return h ? [...h.nextElementSibling.querySelectorAll('figure')].map(f => f.dataset.chart) : [];
	};
	const fig = document.querySelector('#metrics figure[data-chart="prompt_tokens_by_source"]');
	if (!fig) return {Requests: group('Requests')};
	const rects = p => (p.getAttribute('d').match(/M[^Z]*Z/g) || []).map(r => {
		const n = r.match(/-?[\d.]+/g).map(Number); // M lx top H rx V bot H lx
		return {x: n[0], h: n[3] - n[1]};
	});
	const paths = [...fig.querySelectorAll('path.stack')];
	const whole = paths.filter(p => p.dataset.bar === '');
	const xs = [...new Set(whole.flatMap(p => rects(p).map(r => r.x)))].sort((a, b) => a - b);
	const heights = Object.fromEntries(whole.map(p => [p.dataset.key, rects(p).filter(r => r.x === xs[1]).reduce((s, r) => s + r.h, 0)]));
	const sum = Object.values(heights).reduce((a, b) => a + b, 0);
	const hit = fig.querySelector('rect.hit'), r = hit.getBoundingClientRect();
	hit.dispatchEvent(new MouseEvent('mousemove', {clientX: r.right - 2, clientY: r.top + r.height / 2, bubbles: true}));
	const tip = fig.querySelector('.tip');
	const mfu = document.querySelector('#headline .tile[data-tile="mfu"]');
	return {
		Requests: group('Requests'),
		Throughput: group('Throughput'),
		Paths: paths.map(p => (p.dataset.bar || 'step') + ' ' + p.dataset.key + ' ' + p.dataset.n),
		NaN: paths.filter(p => (p.getAttribute('d') || '').includes('NaN')).length,
		Shares: Object.fromEntries(Object.entries(heights).map(([k, v]) => [k, v / sum])),
		Legend: [...fig.querySelectorAll('.legend [data-state]')].map(s => s.textContent),
		Tip: tip.hidden ? [] : [...tip.children].map(c => c.textContent),
		MFU: mfu ? [mfu.querySelector('.tile-label').textContent, mfu.querySelector('.tile-value').textContent,
			String(mfu.querySelectorAll('svg.spark path').length)] : []};
})()`

type requestsPage struct {
	Requests, Throughput, Paths, Legend, Tip, MFU []string
	NaN                                           int
	Shares                                        map[string]float64
}

// TestBrowserRequests opens the report of a run with the request shape keys in headless
// Chromium: the Requests group shows the length quantiles, the truncated share and the prefill
// split, whose bars stack each step's computed, cached and transferred prompt tokens in their
// shares (a thin bar beside for the rollout's computed tokens), named in a legend and in the
// hover tip; the throughput group has the MFU chart and the headline the MFU tile with its line.
func TestBrowserRequests(t *testing.T) {
	b := browser(t)
	dir := t.TempDir()
	recs := requestsRun(4)
	writeSteps(t, dir, recs, true)
	ctx, _, errs := openDir(t, b, dir)

	got := eval[requestsPage](t, ctx, requestsShown)
	for _, id := range []string{"request_prompt_tokens", "request_generation_tokens", "truncated_fraction", "aborted_prompt_tokens", splitID} {
		if !slices.Contains(got.Requests, id) {
			t.Errorf("Requests group %q lacks %s", got.Requests, id)
		}
	}
	if !slices.Contains(got.Throughput, "mfu") {
		t.Errorf("Throughput group %q lacks the MFU chart", got.Throughput)
	}
	// A path per source and bar; step 1 transferred nothing; the rollout (steps 2 to 4) has
	// its computed tokens only.
	want := []string{"step computed 4", "step cached 4", "step transferred 3", "rollout computed 3"}
	if !slices.Equal(got.Paths, want) {
		t.Errorf("stacked paths %q\nwant %q", got.Paths, want)
	}
	if got.NaN != 0 {
		t.Errorf("%d paths with NaN", got.NaN)
	}
	s := splitTokens(2)
	for i, src := range []string{"computed", "cached", "transferred"} {
		if want := s[i] / (s[0] + s[1] + s[2]); math.Abs(got.Shares[src]-want) > 0.01 {
			t.Errorf("%s's share of step 2's bar is %.3f, want %.3f", src, got.Shares[src], want)
		}
	}
	if !slices.Equal(got.Legend, []string{"computed", "cached", "transferred"}) {
		t.Errorf("legend %q", got.Legend)
	}
	if len(got.Tip) != 5 || !strings.HasPrefix(got.Tip[0], "step 4 · ") || !strings.HasSuffix(got.Tip[0], " tokens") ||
		!strings.HasPrefix(got.Tip[1], "computed: ") || !strings.HasPrefix(got.Tip[3], "transferred: ") {
		t.Errorf("hover tip %q", got.Tip)
	}
	if len(got.MFU) != 3 || got.MFU[0] != "MFU" || !strings.HasSuffix(got.MFU[1], "%") || got.MFU[2] == "0" {
		t.Errorf("MFU tile %q, want its label, a percentage and its steps' line", got.MFU)
	}
	eval[bool](t, ctx, `(document.querySelector('#metrics figure[data-chart="prompt_tokens_by_source"] rect.hit').dispatchEvent(new MouseEvent('mouseleave')), true)`)
	screenshot(t, ctx, "report-requests.png")
	errs.check(t)
}
