package report

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

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

// browser starts a headless chromium with a fresh profile and no background traffic, and
// returns a context for a tab in it.
func browser(t *testing.T) context.Context {
	t.Helper()
	// Chromium's helper processes may still write to the profile as the browser exits, so the
	// folder is removed after the browser, and without failing the test.
	profile, err := os.MkdirTemp("", "vllmstat-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 20 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
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
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Run(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
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
		if n := eval[int](t, ctx, `document.querySelectorAll('#steps-table thead th').length`); n != 6+len(keys) {
			t.Errorf("table has %d columns, want %d", n, 6+len(keys))
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
		eval[bool](t, ctx, `(document.querySelector('#steps-table tbody tr[data-step="12"] td').click(), scrollTo(0, 0), true)`)
		screenshot(t, ctx, "report-8-workers.png")
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
	if load > 30*time.Second {
		t.Errorf("loading took %v", load)
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
