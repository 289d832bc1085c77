package cli

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/step"
)

// balanceTarget is the one target of balanceStep's fleet.
const balanceTarget = "http://h:8000/metrics"

// balancePage is a page of three engines with the given running requests and, after the
// first scrape, prefix-cache and preemption counters that differ per engine.
func balancePage(t *testing.T, running [3]float64, first bool) *page.Page {
	t.Helper()
	var b strings.Builder
	for e := range 3 {
		q, h, p := 100.0, []float64{50, 25, 90}[e], []float64{0, 2, 7}[e]
		if first {
			q, h, p = 0, 0, 0
		}
		l := fmt.Sprintf(`{engine="%d",model_name="m"}`, e)
		fmt.Fprintf(&b, "vllm:num_requests_running%s %v\nvllm:num_requests_waiting%s 0\n", l, running[e], l)
		fmt.Fprintf(&b, "vllm:prefix_cache_queries_total%s %v\nvllm:prefix_cache_hits_total%s %v\nvllm:num_preemptions_total%s %v\n", l, q, l, h, l, p)
	}
	p, err := page.ParsePage([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// feedBalance scrapes the three engines at 0…4 s: engines 0 and 1 are busy until 1 s, engine 2
// until 4 s, so the tail is 3 s and engine 2 is the straggler; engine 1 has the lowest hit
// rate (25%) and engine 2 the most preemptions (7).
func feedBalance(t *testing.T, tr *step.Tracker, t0 time.Time) {
	t.Helper()
	for i := range 5 {
		busy := func(until int) float64 {
			if i <= until {
				return 2
			}
			return 0
		}
		tr.Observe(t0.Add(time.Duration(i)*time.Second), balanceTarget, balancePage(t, [3]float64{busy(1), busy(1), busy(4)}, i == 0), nil)
	}
}

func balanceRecord(t *testing.T) step.Record {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tr := step.NewTracker(step.Options{Prefix: "vllm"})
	feedBalance(t, tr, t0)
	return tr.EndStep(1, t0.Add(4*time.Second))
}

func TestSummaryLineTail(t *testing.T) {
	r := balanceRecord(t)
	if got := summaryLine(&r, "vllm"); !strings.HasSuffix(got, " | tail 3.0s (h:8000#2)") {
		t.Errorf("summary %q, want the 3 s tail and engine 2 named", got)
	}
	r.Stragglers = append(r.Stragglers, step.Straggler{Target: balanceTarget, Engine: "1", Labels: map[string]string{"ReplicaId": "r1"}, LastBusyS: 1})
	if got := summaryLine(&r, "vllm"); !strings.HasSuffix(got, " | tail 3.0s (h:8000#2 +1)") {
		t.Errorf("summary %q, want one more straggler counted", got)
	}
	one := step.Record{Step: 2, Workers: 1, Metrics: map[string]float64{}}
	if got := summaryLine(&one, "vllm"); !strings.HasSuffix(got, " | tail -") {
		t.Errorf("summary %q, want no tail", got)
	}
}

func TestStepTableTail(t *testing.T) {
	var b bytes.Buffer
	tab := newStepTable(&b, "vllm")
	r := balanceRecord(t)
	tab.row(&r)
	tab.row(&step.Record{Step: 2, Metrics: map[string]float64{}})
	lines := slices.DeleteFunc(strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n"),
		func(l string) bool { return strings.HasPrefix(l, "     time ") }) // step 1's ledger line
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", b.String())
	}
	if !strings.HasSuffix(lines[0], " tail s straggler") {
		t.Errorf("header %q lacks the tail and straggler columns", lines[0])
	}
	// the tail's column ends where its head does
	if i := strings.Index(lines[0], "tail s") + len("tail s"); !strings.HasSuffix(lines[1][:i], "   3.0") || lines[1][i:] != " h:8000#2" {
		t.Errorf("row %q does not show the 3.0 s tail under its head and the straggler after it", lines[1])
	}
	if f := strings.Fields(lines[2]); f[len(f)-2] != "-" || f[len(f)-1] != "-" {
		t.Errorf("row without a tail %q, want - and -", lines[2])
	}
}

// TestWatchSummaryNamesWorkers: watch's session summary, the step open at exit as its tracker
// has it, lists the new keys and names the straggler and the worst workers.
func TestWatchSummaryNamesWorkers(t *testing.T) {
	cfg := config.Default()
	cfg.MetricPrefix = "vllm"
	var b bytes.Buffer
	w := newWatcher(cfg, false, &b, clock.Real{}, slog.New(slog.DiscardHandler))
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tr := step.NewTracker(step.Options{Prefix: "vllm", Scalars: true})
	feedBalance(t, tr, t0)
	rec := tr.Peek(t0.Add(4*time.Second + time.Nanosecond))
	w.summary(&rec)
	text := b.String()
	for _, s := range []string{
		"vllm/straggler_tail_s ", "vllm/fleet_busy_s ",
		"  stragglers: h:8000#2 (last busy 4.0s)\n",
		"  lowest hit rate: h:8000#1 25.0%\n",
		"  most preemptions: h:8000#2 7\n",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("session summary lacks %q:\n%s", s, text)
		}
	}
}
