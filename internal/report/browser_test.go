package report

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/vllmstat/vllmstat/internal/testkit"
	"github.com/vllmstat/vllmstat/internal/timeline"
)

// balanceState is what a page shows of fleet balance: the groups' names and the counts of the
// balance notes, straggler lines, last-busy marks and dimmed worker lines.
const balanceState = `(() => ({
	Groups: [...document.querySelectorAll('#metrics h3')].map(h => h.textContent),
	Notes: document.querySelectorAll('#straggler-note, #worst-note').length,
	Stragglers: document.querySelectorAll('path.straggler').length,
	Marks: document.querySelectorAll('line.mark').length,
	Dim: document.querySelectorAll('path.dim').length}))()`

// chromiumPath finds Debian's chromium. Without it the browser tests fail in CI (CI=true) and
// are skipped, loudly, elsewhere.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	msg := "chromium is not installed: the report's browser tests cannot run (apt-get install -y chromium)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPED — " + msg)
	return ""
}

// sharedBrowser is the package's one headless chromium, started by the first test that asks
// for a tab and stopped by TestMain: a start costs seconds of CPU (seven starts were a fifth of
// the package's time), and each test has a tab of its own in it.
var sharedBrowser struct {
	once sync.Once
	ctx  context.Context // the browser's first tab, which keeps it open
	err  error
	stop func()
}

// TestMain stops the shared browser once every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	if sharedBrowser.stop != nil {
		sharedBrowser.stop()
	}
	os.Exit(code)
}

// startBrowser starts a headless chromium with a fresh profile and no background traffic; stop
// ends it and removes the profile.
func startBrowser(path string) (ctx context.Context, stop func(), err error) {
	profile, err := os.MkdirTemp("", "vllmstat-chromium-")
	if err != nil {
		return nil, nil, err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1400, 1000),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	stop = func() {
		bcancel()
		acancel()
		// Chromium's last processes may still write into the profile as they exit.
		testkit.Poll(2*time.Second, func() bool { return os.RemoveAll(profile) == nil })
	}
	if err := chromedp.Run(bctx); err != nil {
		stop()
		return nil, nil, err
	}
	return bctx, stop, nil
}

// browser returns a context for a new tab of the package's headless chromium (sharedBrowser),
// closed when the test ends; the test's calls in it time out after 90 s.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	b := &sharedBrowser
	b.once.Do(func() { b.ctx, b.stop, b.err = startBrowser(path) })
	if b.err != nil {
		t.Fatalf("start chromium: %v", b.err)
	}
	tab, closeTab := chromedp.NewContext(b.ctx)
	t.Cleanup(closeTab)
	ctx, cancel := context.WithTimeout(tab, 90*time.Second)
	t.Cleanup(cancel)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("open a tab in chromium: %v", err)
	}
	return ctx
}

// jsErrors collects the page's uncaught exceptions and console errors.
type jsErrors struct {
	mu   sync.Mutex
	errs []string
}

func (j *jsErrors) listen(ctx context.Context) {
	chromedp.ListenTarget(ctx, func(ev any) {
		j.mu.Lock()
		defer j.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			j.errs = append(j.errs, ev.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				j.errs = append(j.errs, "console."+string(ev.Type)+": "+strings.Join(args, " "))
			}
		}
	})
}

func (j *jsErrors) check(t *testing.T) {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range j.errs {
		t.Errorf("JavaScript error: %s", e)
	}
}

// openReport writes the report of a made-up run and loads it from disk in a new tab.
func openReport(t *testing.T, parent context.Context, steps, workers int, timelines bool) (context.Context, string, *jsErrors) {
	t.Helper()
	dir := t.TempDir()
	writeRun(t, dir, steps, workers, 40, timelines)
	return openDir(t, parent, dir)
}

// openDir writes the report of the run in dir and loads it from disk in a new tab.
func openDir(t *testing.T, parent context.Context, dir string) (context.Context, string, *jsErrors) {
	t.Helper()
	path := filepath.Join(dir, "report.html")
	if err := WriteFile(path, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := chromedp.NewContext(parent)
	t.Cleanup(cancel)
	errs := &jsErrors{}
	errs.listen(ctx)
	if err := chromedp.Run(ctx,
		chromedp.Navigate("file://"+path),
		chromedp.WaitReady("#steps-table tbody tr", chromedp.ByQuery),
	); err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	return ctx, dir, errs
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	var v T
	if err := chromedp.Run(ctx, chromedp.Evaluate(js, &v)); err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// screenshot saves the whole page as PNG in t's temporary folder and, when
// VLLMSTAT_SCREENSHOT_DIR is set, there too, so that a person can look at it.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	var buf []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&buf, 100)); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 1000 {
		t.Errorf("screenshot is only %dx%d", b.Dx(), b.Dy())
	}
	dirs := []string{t.TempDir()}
	if d := os.Getenv("VLLMSTAT_SCREENSHOT_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot: %s", filepath.Join(dirs[len(dirs)-1], name))
}

func TestBrowserReport(t *testing.T) {
	b := browser(t)

	t.Run("charts, hover, picker, table", func(t *testing.T) {
		const steps, workers = 12, 8
		ctx, dir, errs := openReport(t, b, steps, workers, true)
		recs, err := ReadSteps(filepath.Join(dir, "steps.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		// Every key is one series; its points are the steps that have the key.
		keys := map[string]int{}
		for _, r := range recs {
			for k := range r.Metrics {
				keys[k]++
			}
		}
		wantPoints := 0
		for _, n := range keys {
			wantPoints += n
		}
		type count struct{ Series, Points, Vertices int }
		got := eval[count](t, ctx, `(() => {
			const ps = [...document.querySelectorAll('#metrics path.series')];
			return {Series: ps.length,
				Points: ps.reduce((s, p) => s + +p.dataset.n, 0),
				Vertices: ps.reduce((s, p) => s + (p.getAttribute('d').match(/[ML]/g) || []).length, 0)};
		})()`)
		if got.Series != len(keys) || got.Points != wantPoints || got.Vertices != wantPoints {
			t.Errorf("charts draw %d series with %d points (%d vertices), want %d series with %d points", got.Series, got.Points, got.Vertices, len(keys), wantPoints)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll('#steps-table tbody tr').length`); n != steps {
			t.Errorf("table has %d rows, want %d", n, steps)
		}
		type columns struct{ Cells, Keys int }
		if c := eval[columns](t, ctx, `({Cells: document.querySelector('#steps-table tbody tr').cells.length,
			Keys: document.querySelectorAll('#steps-table thead tr.stats th[data-key]').length})`); c.Cells != 6+len(keys) || c.Keys != len(keys) {
			t.Errorf("table has %d columns, %d of keys; want %d, %d", c.Cells, c.Keys, 6+len(keys), len(keys))
		}

		// Hover on a chart shows the values at the nearest step.
		tip := eval[string](t, ctx, `(() => {
			const fig = document.querySelector('#metrics figure'), hit = fig.querySelector('rect.hit');
			const r = hit.getBoundingClientRect();
			hit.dispatchEvent(new MouseEvent('mousemove', {clientX: r.right - 1, clientY: r.top + r.height / 2, bubbles: true}));
			const tip = fig.querySelector('.tip');
			return tip.hidden ? '' : tip.textContent;
		})()`)
		if !strings.HasPrefix(tip, fmt.Sprintf("step %d", steps)) {
			t.Errorf("hover tip = %q, want the values of step %d", tip, steps)
		}

		// The picker starts on the last step; choosing another changes the timelines shown.
		type shown struct {
			Step    string
			Figures int
			Workers int
			Means   int
			Paths   string
		}
		state := `(() => {
			const v = document.getElementById('timelines');
			return {Step: v.dataset.step, Figures: v.querySelectorAll('figure').length,
				Workers: v.querySelectorAll('path.worker').length, Means: v.querySelectorAll('path.mean').length,
				Paths: [...v.querySelectorAll('path')].map(p => p.getAttribute('d')).join('|')};
		})()`
		before := eval[shown](t, ctx, state)
		const series = 6 // testStep's timeline series
		if before.Step != fmt.Sprint(steps) || before.Figures != series || before.Workers != series*workers || before.Means != series {
			t.Errorf("timelines of the last step: %+v", before)
		}
		if err := chromedp.Run(ctx, chromedp.SetValue("#step-picker", "3", chromedp.ByID), chromedp.Evaluate(`document.getElementById('step-picker').dispatchEvent(new Event('change'))`, nil)); err != nil {
			t.Fatal(err)
		}
		after := eval[shown](t, ctx, state)
		if after.Step != "3" || after.Figures != series || after.Paths == before.Paths {
			t.Errorf("picking step 3 did not change the timelines: step %s, %d figures, same paths %v", after.Step, after.Figures, after.Paths == before.Paths)
		}
		// A click on a table row picks its step too.
		eval[bool](t, ctx, `(document.querySelector('#steps-table tbody tr[data-step="5"] td').click(), true)`)
		if s := eval[shown](t, ctx, state); s.Step != "5" {
			t.Errorf("clicking the row of step 5 shows step %s", s.Step)
		}
		// Records without the balance keys and fields: no such group, nothing marked.
		type balanceShown struct {
			Groups                   []string
			Notes, Stragglers, Marks int
			Dim                      int
		}
		if got := eval[balanceShown](t, ctx, balanceState); slices.Contains(got.Groups, "Fleet balance") || got.Notes+got.Stragglers+got.Marks+got.Dim != 0 {
			t.Errorf("a run without balance fields shows %+v", got)
		}
		eval[bool](t, ctx, `(document.querySelector('#steps-table tbody tr[data-step="12"] td').click(), scrollTo(0, 0), true)`)
		screenshot(t, ctx, "report-8-workers.png")
		errs.check(t)
	})

	t.Run("fleet balance and stragglers", func(t *testing.T) {
		const steps, workers = 8, 5
		dir := t.TempDir()
		writeBalanceRun(t, dir, steps, workers, true)
		ctx, _, errs := openDir(t, b, dir)

		// The group's charts, in their order, each with a line per key.
		type chartShown struct {
			Title  string
			Series []string
			Points int
		}
		charts := eval[[]chartShown](t, ctx, `(() => {
			const h = [...document.querySelectorAll('#metrics h3')].find(h => h.textContent === 'Fleet balance');
			if (!h) return [];
			return [...h.nextElementSibling.querySelectorAll('figure')].map(f => ({Title: f.dataset.chart,
				Series: [...f.querySelectorAll('path.series')].map(p => p.dataset.key),
				Points: [...f.querySelectorAll('path.series')].reduce((s, p) => s + +p.dataset.n, 0)}));
		})()`)
		want := []chartShown{
			{"straggler_tail_s", []string{"step"}, 6},
			{"fleet_busy_s", []string{"step"}, 6},
			{"worker_idle_fraction", []string{"max", "mean"}, 12},
			{"generation_tokens_imbalance", []string{"step"}, 6},
			{"prefix_cache_hit_rate/worst_worker", []string{"step"}, 6},
			{"num_preemptions/worst_worker", []string{"step"}, 6},
		}
		if fmt.Sprint(charts) != fmt.Sprint(want) {
			t.Errorf("fleet balance charts:\n%v\nwant (6 of 8 steps have the keys):\n%v", charts, want)
		}

		type stepShown struct {
			Step, Note, Worst string
			Stragglers        []string // the name of each straggler line
			Marks             int
			Dim               int
		}
		pickStep := func(n int) stepShown {
			t.Helper()
			if err := chromedp.Run(ctx, chromedp.SetValue("#step-picker", fmt.Sprint(n), chromedp.ByID),
				chromedp.Evaluate(`document.getElementById('step-picker').dispatchEvent(new Event('change'))`, nil)); err != nil {
				t.Fatal(err)
			}
			return eval[stepShown](t, ctx, `(() => {
				const v = document.getElementById('timelines'), text = id => (document.getElementById(id) || {}).textContent || '';
				return {Step: v.dataset.step, Note: text('straggler-note'), Worst: text('worst-note'),
					Stragglers: [...v.querySelectorAll('path.straggler')].map(p => p.dataset.key),
					Marks: v.querySelectorAll('line.mark').length, Dim: v.querySelectorAll('path.dim').length};
			})()`)
		}
		const series = 6
		// Step 2's straggler is worker 2 (10.0.0.3), last busy at 18 s of 20.
		got := pickStep(2)
		if got.Note != "straggler: 10.0.0.3:8000#0, last busy 18 s" || got.Worst != "" {
			t.Errorf("step 2 notes: %q, %q", got.Note, got.Worst)
		}
		if len(got.Stragglers) != series || got.Stragglers[0] != "10.0.0.3:8000#0 (straggler)" || got.Marks != series || got.Dim != series*(workers-1) {
			t.Errorf("step 2 timelines: %+v, want the straggler's line and a last-busy mark in each of %d charts, the other workers dimmed", got, series)
		}
		// The mark sits at 18 s: 90% of the way along the x axis, which runs from the left margin
		// (58) to the right one (12) of the 560 wide chart.
		frac := eval[float64](t, ctx, `(() => {
			const m = document.querySelector('#timelines figure svg line.mark');
			return (+m.getAttribute('x1') - 58) / (560 - 58 - 12);
		})()`)
		if frac < 0.89 || frac > 0.91 {
			t.Errorf("the last-busy mark is at %.3f of the axis, want 0.9", frac)
		}
		screenshot(t, ctx, "report-straggler.png")
		// Step 6 names two stragglers, one of them not in the timeline: both in the note, one line.
		got = pickStep(6)
		if got.Note != "stragglers: 10.0.0.2:8000#0, last busy 18 s; 10.9.9.9:8000#1[ReplicaId=r7], last busy 17.25 s" || len(got.Stragglers) != series || got.Marks != 2*series {
			t.Errorf("step 6: %+v", got)
		}
		// Step 3 names its worst workers and no straggler.
		got = pickStep(3)
		if got.Note != "" || got.Worst != "most preemptions: 10.0.0.1:8000#0 (9) · lowest prefix-cache hit rate: 10.0.0.2:8000#0 (0.25)" ||
			len(got.Stragglers)+got.Marks+got.Dim != 0 {
			t.Errorf("step 3: %+v", got)
		}
		// Step 8 has a straggler but no timeline file in the report: the note alone.
		os.Remove(timeline.Path(dir, 8))
		ctx, _, errs2 := openDir(t, b, dir)
		got = pickStep(8)
		if got.Note != "straggler: 10.0.0.4:8000#0, last busy 18 s" || len(got.Stragglers) != 0 {
			t.Errorf("step 8 without a timeline: %+v", got)
		}
		errs.check(t)
		errs2.check(t)
	})

	t.Run("stragglers past 16 workers", func(t *testing.T) {
		dir := t.TempDir()
		writeBalanceRun(t, dir, 2, 40, true)
		ctx, _, errs := openDir(t, b, dir)
		type shown struct {
			Note       string
			Stragglers []string
			Bands      int
			Workers    int
		}
		got := eval[shown](t, ctx, `(() => {
			const v = document.getElementById('timelines');
			return {Note: (document.getElementById('straggler-note') || {}).textContent || '',
				Stragglers: [...v.querySelectorAll('path.straggler')].map(p => p.dataset.key),
				Bands: v.querySelectorAll('polygon.band').length, Workers: v.querySelectorAll('path.worker').length};
		})()`)
		if got.Note != "straggler: 10.0.0.3:8000#0, last busy 18 s" || len(got.Stragglers) != 6 || got.Stragglers[0] != "10.0.0.3:8000#0 (straggler)" || got.Bands != 6 || got.Workers != 0 {
			t.Errorf("step 2 of 40 workers: %+v, want the band and the straggler's own line in each of 6 charts", got)
		}
		errs.check(t)
	})

	t.Run("band and heatmap past 16 workers", func(t *testing.T) {
		ctx, _, errs := openReport(t, b, 4, 40, true)
		type shown struct{ Bands, Heatmaps, Workers, P95 int }
		got := eval[shown](t, ctx, `(() => {
			const v = document.getElementById('timelines');
			return {Bands: v.querySelectorAll('polygon.band').length, Heatmaps: v.querySelectorAll('canvas.heatmap').length,
				Workers: v.querySelectorAll('path.worker').length, P95: v.querySelectorAll('path.p95').length};
		})()`)
		if got.Bands != 6 || got.Heatmaps != 6 || got.P95 != 6 || got.Workers != 0 {
			t.Errorf("timelines of 40 workers: %+v, want a band, p95 line and heatmap per series and no worker lines", got)
		}
		eval[bool](t, ctx, `(document.getElementById('timelines-section').scrollIntoView(), true)`)
		screenshot(t, ctx, "report-40-workers.png")
		errs.check(t)
	})

	t.Run("a run without timelines says so", func(t *testing.T) {
		ctx, _, errs := openReport(t, b, 3, 2, false)
		msg := eval[string](t, ctx, `(document.getElementById('no-timelines') || {}).textContent || ''`)
		if !strings.Contains(msg, "no timelines") {
			t.Errorf("no note about missing timelines; got %q", msg)
		}
		errs.check(t)
	})
}

// TestBrowserLargeReport loads the report of 1,000 steps × 512 workers (timelines embedded as
// the budget allows) and checks that it renders without errors in reasonable time.
func TestBrowserLargeReport(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("SKIPPED, NOT TESTED: the large report is not loaded with -short; CI loads it")
	}
	opt := Options{}
	if raceEnabled {
		opt.TimelineSteps = 20
	}
	var page bytes.Buffer
	if err := writeFrom(&page, largeRun(t, 1000), newSynthSource(512, 120, 1000), opt, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	b := browser(t)
	path := filepath.Join(t.TempDir(), "large.html")
	if err := os.WriteFile(path, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := chromedp.NewContext(b)
	defer cancel()
	errs := &jsErrors{}
	errs.listen(ctx)
	start := time.Now()
	if err := chromedp.Run(ctx, chromedp.Navigate("file://"+path), chromedp.WaitReady("#steps-table tbody tr", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	load := time.Since(start)
	t0 := time.Now()
	eval[bool](t, ctx, `(document.getElementById('prev-step').click(), true)`)
	pick := time.Since(t0)
	t.Logf("large report: %.1f MiB, loaded and drawn in %v, step picked in %v", float64(page.Len())/(1<<20), load.Round(time.Millisecond), pick.Round(time.Millisecond))
	if n := eval[int](t, ctx, `document.querySelectorAll('#steps-table tbody tr').length`); n != 1000 {
		t.Errorf("table has %d rows", n)
	}
	// The button moved the picker one step back, and nothing drawn for it or in the table
	// came out as NaN (a path with NaN coordinates draws nothing, silently).
	type drawn struct {
		Step            string
		Paths, NaNPaths int
		TextHasNaN      bool
	}
	d := eval[drawn](t, ctx, `(() => {
		const v = document.getElementById('timelines');
		const ds = [...v.querySelectorAll('path')].map(p => p.getAttribute('d') || '');
		return {Step: v.dataset.step, Paths: ds.length, NaNPaths: ds.filter(x => x.includes('NaN')).length,
			TextHasNaN: document.body.innerText.includes('NaN')};
	})()`)
	if d.Step != "999" || d.Paths == 0 || d.NaNPaths != 0 || d.TextHasNaN {
		t.Errorf("after the previous-step button: %+v, want step 999 drawn without NaN", d)
	}
	errs.check(t)
}
