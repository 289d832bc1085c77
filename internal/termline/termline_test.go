package termline

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// testRecord is a 30 s step of three workers sampled every second: one busy throughout, one
// idle for the first half then filling its KV cache, and one that stopped answering after 10 s.
func testRecord() *step.Record {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	series := func(n int, f func(i int) float64) []step.Point {
		ps := make([]step.Point, n)
		for i := range ps {
			ps[i] = step.Point{OffsetS: float64(i + 1), Value: f(i)}
		}
		return ps
	}
	return &step.Record{
		Step: 42, Start: start, End: start.Add(30 * time.Second), DurationS: 30,
		Timeline: &step.Timeline{Start: start, Workers: []step.WorkerTimeline{
			{WorkerID: step.WorkerID{Target: "http://10.0.0.1:8000/metrics", Engine: "0"}, Series: map[string][]step.Point{
				"num_requests_running": series(30, func(i int) float64 { return float64(8 + i%4) }),
				"kv_cache_usage_perc":  series(30, func(i int) float64 { return 0.3 + 0.02*float64(i) }),
			}},
			{WorkerID: step.WorkerID{Target: "http://10.0.0.2:8000/metrics", Engine: "0"}, Series: map[string][]step.Point{
				"num_requests_running": series(30, func(i int) float64 { return float64(max(i-14, 0)) }),
				"kv_cache_usage_perc":  series(30, func(i int) float64 { return max(float64(i-14)*0.06, 0) }),
			}},
			{WorkerID: step.WorkerID{Target: "http://a-very-long-hostname.cluster.internal:8000/metrics"}, Series: map[string][]step.Point{
				"num_requests_running": series(10, func(i int) float64 { return 2 }),
			}},
		}},
	}
}

func TestLinesGolden(t *testing.T) {
	for _, width := range []int{60, 120} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			lines := Lines(testRecord(), Options{Width: width})
			for _, l := range lines[1:] {
				if n := utf8.RuneCountInString(l); n > width {
					t.Errorf("line is %d columns, wider than %d: %q", n, width, l)
				}
			}
			testkit.Golden(t, fmt.Sprintf("width%d.txt", width), []byte(strings.Join(lines, "\n")+"\n"))
		})
	}
}

func TestLinesChosenMetric(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, testRecord(), Options{Width: 80, Metrics: []string{"num_preemptions"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "preemptions80.txt", b.Bytes())
}

func TestNoTimeline(t *testing.T) {
	got := Lines(&step.Record{Step: 3}, Options{})
	if len(got) != 1 || got[0] != "step 3: no timeline" {
		t.Errorf("Lines = %q", got)
	}
}

func TestBlock(t *testing.T) {
	for _, tt := range []struct {
		v, peak float64
		want    rune
	}{{0, 1, ' '}, {-1, 1, ' '}, {0.001, 1, '▁'}, {0.125, 1, '▁'}, {0.13, 1, '▂'}, {0.5, 1, '▄'}, {1, 1, '█'}, {2, 1, '█'}, {1, 0, ' '}} {
		if got := block(tt.v, tt.peak); got != tt.want {
			t.Errorf("block(%v, %v) = %q, want %q", tt.v, tt.peak, got, tt.want)
		}
	}
}

func TestWidthNotATerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := Width(f); got != DefaultWidth {
		t.Errorf("Width of a file = %d, want %d", got, DefaultWidth)
	}
}

// TestActivityFromTracker: a worker whose activity the tracker measured shows those figures
// (here unlike its running series: 10 s of running 2), the others their own series'.
func TestActivityFromTracker(t *testing.T) {
	r := testRecord()
	r.Timeline.Workers[2].Activity = &step.Activity{BusyS: 7, IdleS: 1.5, LastBusyS: 9}
	lines := Lines(r, Options{Width: 120})
	// lines[1:4] are the workers' lines of the first metric, in order
	for i, want := range []string{"active 30.0s idle 0.0s", "active 15.0s idle 15.0s", "active 7.0s idle 1.5s"} {
		l := lines[1+i]
		got := strings.Join(strings.Fields(l[strings.LastIndex(l, "│ ")+len("│ "):]), " ")
		if got != want {
			t.Errorf("worker %d: %q, want %q", i, got, want)
		}
	}
}
