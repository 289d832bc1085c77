package report

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
)

// TestBrowserFirstView checks what a user sees first: the headline, the charts titled and
// ordered by the spec with the always-zero keys in one line, the table grouped as the charts,
// a worker's colour in every chart, and the timeline files of the run's own steps.
func TestBrowserFirstView(t *testing.T) {
	b := browser(t)

	t.Run("headline", func(t *testing.T) {
		dir := t.TempDir()
		writeBalanceRun(t, dir, 8, 5, true)
		recs, bals, err := readSteps(filepath.Join(dir, "steps.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		d, err := build("t", recs, bals, newDirSource(dir), Options{}.withDefaults(), time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		ctx, _, errs := openDir(t, b, dir)
		type tileShown struct {
			ID, Label, Value, Sub string
			Sparks                int
		}
		type shown struct {
			Tiles        []tileShown
			Top, Metrics float64 // the headline's top and the charts' top, in pixels
		}
		got := eval[shown](t, ctx, `(() => ({
			Tiles: [...document.querySelectorAll('#headline .tile')].map(t => ({ID: t.dataset.tile,
				Label: t.querySelector('.tile-label').textContent, Value: t.querySelector('.tile-value').textContent,
				Sub: (t.querySelector('.tile-sub') || {}).textContent || '', Sparks: t.querySelectorAll('svg.spark path').length})),
			Top: document.getElementById('headline').getBoundingClientRect().top,
			Metrics: document.getElementById('metrics').getBoundingClientRect().top}))()`)
		var want []tileShown
		for _, x := range d.Headline {
			want = append(want, tileShown{x.ID, x.Label, x.Value, x.Sub, len(x.Spark)})
		}
		ids := []string{"steps", "workers", "hit-rate", "preemptions", "throughput", "ttft", "straggler-tail"}
		if fmt.Sprint(got.Tiles) != fmt.Sprint(want) || len(got.Tiles) != len(ids) {
			t.Errorf("headline:\n%+v\nwant:\n%+v", got.Tiles, want)
		}
		for i, id := range ids {
			if i < len(got.Tiles) && got.Tiles[i].ID != id {
				t.Errorf("tile %d is %s, want %s", i, got.Tiles[i].ID, id)
			}
		}
		// Straggler tails of 0.4 s × the step, in the steps with the balance keys.
		if tile := got.Tiles[len(got.Tiles)-1]; strings.ReplaceAll(tile.Value, nbsp, " ") != "400 ms → 2.8 s" || !strings.Contains(strings.ReplaceAll(tile.Sub, nbsp, " "), "rising, +400 ms per step") {
			t.Errorf("straggler tail tile %+v", tile)
		}
		if got.Top > 80 || got.Metrics < got.Top {
			t.Errorf("the headline is at %v px, the charts at %v px: want it first, at the top", got.Top, got.Metrics)
		}
		errs.check(t)
	})

	t.Run("charts, always zero, table", func(t *testing.T) {
		dir := t.TempDir()
		zeroRun(t, dir, 4)
		ctx, _, errs := openDir(t, b, dir)
		type chartShown struct{ ID, Caption, Unit string }
		type shown struct {
			XSS     any
			Images  int
			Groups  []string
			Charts  []chartShown
			Zero    string
			Head    []string // the table's groups
			Keys    []string // its key columns
			Charted []string // the charts' keys in page order, then the line's
		}
		got := eval[shown](t, ctx, `(() => {
			const D = JSON.parse(document.getElementById('data').textContent);
			const keys = cs => cs.flatMap(c => c.keys.map(k => D.keys[k]));
			return {XSS: window.__xss || null, Images: document.querySelectorAll('img, #app script').length,
				Groups: [...document.querySelectorAll('#metrics h3')].map(h => h.textContent),
				Charts: [...document.querySelectorAll('#metrics figure')].map(f => ({ID: f.dataset.chart,
					Caption: f.querySelector('figcaption').firstChild.textContent,
					Unit: [...f.querySelectorAll('svg .axes text.label')].map(t => t.textContent).join('|')})),
				Zero: (document.getElementById('always-zero') || {}).textContent || '',
				Head: [...document.querySelectorAll('#steps-table thead tr.groups th')].map(h => h.textContent),
				Keys: [...document.querySelectorAll('#steps-table thead tr.stats th')].map(h => h.dataset.key),
				Charted: keys(D.groups.flatMap(g => g.charts)).concat(keys(D.zero))};
		})()`)
		if got.XSS != nil || got.Images != 0 {
			t.Fatalf("markup in a key ran: %+v", got)
		}
		if want := []string{"Phases", "Prefix cache", "Preemptions", "KV cache", "Queue", "Throughput", "Latency"}; !slices.Equal(got.Groups, want) {
			t.Errorf("groups %q, want %q", got.Groups, want)
		}
		// The seed's figures first, titled and with units as the spec has them.
		wantFirst := []chartShown{
			{"duration_s", "Step and phase time", "step|seconds"},
			{"prefix_cache_hit_rate", "Prefix cache hit rate", "step|hits / queries (0–1)"},
			{"prefix_cache_queries", "Prefix cache queries", "step|tokens per step"},
			{"prefix_cache_hits", "Prefix cache hits", "step|tokens per step"},
			{"num_preemptions", "Preemptions", "step|preemptions per step"},
			{"kv_cache_usage_perc", "KV cache usage", "step|fraction of KV cache in use (0–1)"},
			{"num_requests_running", "Requests running", "step|requests"},
		}
		if len(got.Charts) < len(wantFirst) || fmt.Sprint(got.Charts[:len(wantFirst)]) != fmt.Sprint(wantFirst) {
			t.Errorf("first charts:\n%+v\nwant:\n%+v", got.Charts, wantFirst)
		}
		for _, c := range got.Charts {
			if c.Caption == c.ID || strings.HasPrefix(c.ID, "external") {
				t.Errorf("chart %+v: titled by its key, or zero in every step", c)
			}
		}
		wantZero := `Always zero in every step, not charted: External prefix cache queries · External prefix cache hits · ` +
			`Requests finished (abort, error) · Time to first token (rollout p99) · <img src=z onerror="window.__xss=4">`
		if got.Zero != wantZero {
			t.Errorf("always-zero line:\n%s\nwant:\n%s", got.Zero, wantZero)
		}
		// The table's columns: the step's, then the groups of the charts, the zero keys last.
		if want := []string{"Step", "Prefix cache", "Preemptions", "KV cache", "Queue", "Throughput", "Latency", "Always zero"}; !slices.Equal(got.Head, want) {
			t.Errorf("table groups %q, want %q", got.Head, want)
		}
		if !slices.Equal(got.Keys, got.Charted) || len(got.Keys) == 0 || got.Keys[0] != "vllm/prefix_cache_hit_rate" {
			t.Errorf("table columns %q\nwant the charts' order %q", got.Keys, got.Charted)
		}
		screenshot(t, ctx, "report-first-view.png")
		errs.check(t)
	})

	t.Run("a worker's colour", func(t *testing.T) {
		dir := t.TempDir()
		var recs []*step.Record
		for n := range int64(3) {
			r := testStep(n+1, 4, 10)
			r.Timeline.Workers = r.Timeline.Workers[n:] // step 2 lacks the first worker, step 3 the first two
			recs = append(recs, r)
		}
		writeSteps(t, dir, recs, true)
		ctx, _, errs := openDir(t, b, dir)
		// Each worker's stroke in every timeline chart of the step shown.
		strokes := func() map[string][]string {
			return eval[map[string][]string](t, ctx, `(() => {
				const m = {};
				document.querySelectorAll('#timelines path.worker').forEach(p => (m[p.dataset.key] = m[p.dataset.key] || []).push(p.getAttribute('stroke')));
				return m;
			})()`)
		}
		colour := map[string]string{}
		for _, n := range []int64{1, 2, 3} {
			chooseStep(t, ctx, n)
			got := strokes()
			if len(got) != 4-int(n-1) {
				t.Errorf("step %d: lines of %d workers, want %d", n, len(got), 4-n+1)
			}
			for w, ss := range got {
				if len(ss) != 6 || len(slices.Compact(slices.Clone(ss))) != 1 {
					t.Errorf("step %d: worker %s has strokes %q, want one in each of 6 charts", n, w, ss)
				}
				if c, ok := colour[w]; ok && c != ss[0] {
					t.Errorf("step %d: worker %s is %s, in step 1 %s", n, w, ss[0], c)
				}
				colour[w] = ss[0]
			}
		}
		distinct := map[string]bool{}
		for _, c := range colour {
			distinct[c] = true
		}
		if len(colour) != 4 || len(distinct) != 4 {
			t.Errorf("colours %v, want four different ones", colour)
		}

		// A straggler's swatch in the note has its lines' colour.
		bdir := t.TempDir()
		writeBalanceRun(t, bdir, 2, 5, true)
		bctx, _, berrs := openDir(t, b, bdir)
		type note struct{ Swatch, Line string }
		if got := eval[note](t, bctx, `({Swatch: document.querySelector('#straggler-note .swatch').style.background,
			Line: document.querySelector('#timelines path.straggler').getAttribute('stroke')})`); got.Swatch == "" || !sameColour(got.Swatch, got.Line) {
			t.Errorf("straggler's swatch %q, line %q", got.Swatch, got.Line)
		}
		errs.check(t)
		berrs.check(t)
	})

	t.Run("the timeline files of these steps", func(t *testing.T) {
		dir := t.TempDir()
		writeRun(t, dir, 5, 2, 10, true)
		var recs []*step.Record
		for n := range int64(2) {
			r := testStep(n+1, 3, 10)
			r.Start, r.End = r.Start.Add(time.Hour), r.End.Add(time.Hour)
			recs = append(recs, r)
		}
		os.Remove(filepath.Join(dir, "steps.jsonl"))
		writeSteps(t, dir, recs[:1], true)
		writeSteps(t, dir, recs[1:], false)
		ctx, _, errs := openDir(t, b, dir)
		type shown struct {
			Summary string
			Options []string
			Notes   []string
		}
		got := eval[shown](t, ctx, `({Summary: document.getElementById('summary').textContent,
			Options: [...document.querySelectorAll('#step-picker option')].map(o => o.textContent),
			Notes: [...document.querySelectorAll('#app > p.note')].map(p => p.textContent)})`)
		if !strings.Contains(got.Summary, " · 1 timeline file · ") || !slices.Equal(got.Options, []string{"step 1", "step 2 (no timeline)"}) ||
			len(got.Notes) != 1 || !strings.HasPrefix(got.Notes[0], "4 timeline files") {
			t.Errorf("%+v", got)
		}
		errs.check(t)
	})
}

// sameColour compares a colour as CSS gives it back ("rgb(31, 119, 180)") with a hex one.
func sameColour(rgb, hex string) bool {
	var r, g, b int
	if _, err := fmt.Sscanf(hex, "#%02x%02x%02x", &r, &g, &b); err != nil {
		return false
	}
	return rgb == fmt.Sprintf("rgb(%d, %d, %d)", r, g, b)
}
