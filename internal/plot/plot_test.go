package plot

import (
	"bytes"
	"flag"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
)

var keep = flag.String("keep", "", "also write the test images to this folder, to look at them")

// fleetRecord is a step of workers×samples samples every 0.5 s, every series filled with a
// smooth, worker-dependent pattern, one worker idle and one that stops answering halfway.
func fleetRecord(workers, samples int) *step.Record {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	dur := 0.5 * float64(samples)
	tl := &step.Timeline{Start: start}
	for w := range workers {
		n := samples
		if w == 1 {
			n = samples / 2
		}
		phase := float64(w) * 0.7
		gen := func(f func(x float64) float64) []step.Point {
			ps := make([]step.Point, n)
			for i := range ps {
				// Scrapes are spread over the interval: each worker has its own offset.
				t := 0.5*float64(i+1) - 0.5*float64(w%5)/5
				x := t / dur
				v := f(x)
				if w == 2 {
					v = 0
				}
				ps[i] = step.Point{OffsetS: t, Value: v}
			}
			return ps
		}
		wave := func(x float64) float64 { return 0.5 + 0.5*math.Sin(6*x+phase) }
		tl.Workers = append(tl.Workers, step.WorkerTimeline{
			WorkerID: step.WorkerID{Target: fmt.Sprintf("http://10.0.%d.%d:8000/metrics", w/250, w%250+1), Engine: "0"},
			Series: map[string][]step.Point{
				"kv_cache_usage_perc":   gen(func(x float64) float64 { return min(1, x*wave(x)*1.3) }),
				"num_requests_running":  gen(func(x float64) float64 { return math.Round(32 * wave(x) * (1 - x)) }),
				"num_requests_waiting":  gen(func(x float64) float64 { return math.Round(20 * max(0, 0.5-x)) }),
				"prefix_cache_hit_rate": gen(func(x float64) float64 { return 0.3 + 0.6*x }),
				"prefix_cache_queries":  gen(func(x float64) float64 { return 4000 * wave(x) }),
				"prefix_cache_hits":     gen(func(x float64) float64 { return 4000 * wave(x) * (0.3 + 0.6*x) }),
				"num_preemptions":       gen(func(x float64) float64 { return math.Floor(3 * max(0, wave(x)-0.8) * 5) }),
				"prompt_tokens":         gen(func(x float64) float64 { return 2000 * wave(x) }),
				"generation_tokens":     gen(func(x float64) float64 { return 900 * wave(x+0.3) }),
			},
		})
	}
	return &step.Record{Step: 12, Start: start, End: start.Add(time.Duration(dur * float64(time.Second))), DurationS: dur, Workers: workers, Timeline: tl}
}

// checkPNG decodes data and checks its size and that it is not blank: some pixels are dark
// (text, axes) and some are coloured (the data).
func checkPNG(t *testing.T, data []byte, w, h int) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("decode PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("image is %dx%d, want %dx%d", b.Dx(), b.Dy(), w, h)
	}
	var dark, coloured, white int
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			switch {
			case r > 245 && g > 245 && bl > 245:
				white++
			case r < 60 && g < 60 && bl < 60:
				dark++
			case max(r, g, bl)-min(r, g, bl) > 60:
				coloured++
			}
		}
	}
	total := w * h
	if white > total*99/100 || dark < total/1000 || coloured < total/1000 {
		t.Errorf("image looks blank: %d white, %d dark, %d coloured of %d pixels", white, dark, coloured, total)
	}
	return img
}

func TestWritePNG(t *testing.T) {
	for _, workers := range []int{1, 8, 64} {
		for _, metric := range []string{"kv_cache_usage_perc", "num_requests_running", "num_preemptions"} {
			t.Run(fmt.Sprintf("%d/%s", workers, metric), func(t *testing.T) {
				rd := NewRenderer(Options{})
				var b bytes.Buffer
				if err := rd.WritePNG(&b, fleetRecord(workers, 120), metric); err != nil {
					t.Fatal(err)
				}
				checkPNG(t, b.Bytes(), 800, 400)
				if *keep != "" {
					os.WriteFile(filepath.Join(*keep, fmt.Sprintf("%d_%s.png", workers, metric)), b.Bytes(), 0o644)
				}
			})
		}
	}
}

func TestWritePNGSize(t *testing.T) {
	rd := NewRenderer(Options{Width: 640, Height: 300, MaxLines: 4})
	var b bytes.Buffer
	if err := rd.WritePNG(&b, fleetRecord(6, 40), "generation_tokens"); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, b.Bytes(), 640, 300)
}

func TestNoSamples(t *testing.T) {
	for _, r := range []*step.Record{{Step: 1}, {Step: 2, Timeline: &step.Timeline{Workers: []step.WorkerTimeline{{Series: map[string][]step.Point{}}}}}} {
		var b bytes.Buffer
		if err := NewRenderer(Options{}).WritePNG(&b, r, "kv_cache_usage_perc"); err != nil {
			t.Fatalf("step %d: %v", r.Step, err)
		}
		if _, err := png.Decode(&b); err != nil {
			t.Fatal(err)
		}
		if got := Metrics(r); len(got) != 0 {
			t.Errorf("Metrics of step %d = %v", r.Step, got)
		}
	}
}

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	r := fleetRecord(3, 20)
	r.Timeline.Workers[0].Series["custom_series"] = []step.Point{{OffsetS: 1, Value: 2}}
	r.Timeline.Workers[0].Series["num_preemptions"] = append(r.Timeline.Workers[0].Series["num_preemptions"], step.Point{OffsetS: 9, Value: math.NaN()})
	rels, err := NewRenderer(Options{}).WriteFiles(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kv_cache_usage_perc", "num_requests_running", "num_requests_waiting", "prefix_cache_hit_rate", "prefix_cache_queries", "prefix_cache_hits", "num_preemptions", "prompt_tokens", "generation_tokens", "custom_series"}
	if len(rels) != len(want) {
		t.Fatalf("WriteFiles = %v", rels)
	}
	for i, rel := range rels {
		if w := "plots/step_000012/" + want[i] + ".png"; rel != w {
			t.Errorf("path %d = %q, want %q", i, rel, w)
		}
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if want[i] == "custom_series" {
			continue // one point draws no line
		}
		checkPNG(t, data, 800, 400)
	}
}

// BenchmarkRender draws one metric of a 120-sample step and encodes it as PNG.
//
//	go test ./internal/plot -run '^$' -bench Render -count 6 | tee new.txt; benchstat new.txt
func BenchmarkRender(b *testing.B) {
	for _, workers := range []int{8, 64, 512} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			r := fleetRecord(workers, 120)
			rd := NewRenderer(Options{})
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if err := rd.WritePNG(&buf, r, "kv_cache_usage_perc"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len()), "png_bytes")
		})
	}
}
