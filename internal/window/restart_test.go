package window

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// engine0 renders one engine's page: counters (family as on the page, without _total, and its
// labels after engine and model_name; value as written; "" leaves it out), with created as the
// _created of every counter (0: none, as in multiprocess mode), and an optional TTFT histogram.
func engine0(created float64, hist string, counters ...string) string {
	var b strings.Builder
	for i := 0; i+2 < len(counters); i += 3 {
		name, labels, v := counters[i], counters[i+1], counters[i+2]
		if v == "" {
			continue
		}
		l := `engine="0",model_name="m"` + labels
		fmt.Fprintf(&b, "vllm:%s_total{%s} %s\n", name, l, v)
		if created != 0 {
			fmt.Fprintf(&b, "vllm:%s_created{%s} %v\n", name, l, created)
		}
	}
	return b.String() + hist
}

// incs spells the increases of a few families: preemptions, prompt tokens, request_success by
// reason (sorted) and the TTFT histogram; "-" for a family without one.
func incs(inc Increase) string {
	f := func(c vllm.Counter) string {
		if !inc.HasCounter[c] {
			return "-"
		}
		return fmt.Sprint(inc.Counters[c])
	}
	s := fmt.Sprintf("preempt=%s prompt=%s", f(vllm.Preemptions), f(vllm.PromptTokens))
	shares := slices.Clone(inc.Shares[vllm.RequestSuccess])
	slices.SortFunc(shares, func(a, b Share) int { return strings.Compare(a.Value, b.Value) })
	for _, sh := range shares {
		s += fmt.Sprintf(" %s=%v", sh.Value, sh.Inc)
	}
	if d := inc.Hists[vllm.TTFT]; d != nil {
		s += " ttft " + fmtDelta(d)
	}
	return s
}

// TestWorkerRestartCountsEverySeries: on pages without _created a restart shows only as counters
// going down, series by series. A rarely used series can end a restart that no scrape saw above
// its old value (abort 1 before, 3 after): counted as new minus old it lost what the restart
// made. A counter going down means the worker's process restarted, so each counter on that
// page restarted with it and counts from zero at that scrape; where the page has _created,
// each series' own _created says whether it restarted, exactly.
func TestWorkerRestartCountsEverySeries(t *testing.T) {
	const stop, abort, errs = `,finished_reason="stop"`, `,finished_reason="abort"`, `,finished_reason="error"`
	tests := []struct {
		name  string
		pages []string
		want  []string
	}{
		{"a counter down: every series of the worker counts from zero", []string{
			engine0(0, "", "num_preemptions", "", "10", "prompt_tokens", "", "9000", "request_success", stop, "50", "request_success", abort, "1", "request_success", errs, "1"),
			engine0(0, "", "num_preemptions", "", "3", "prompt_tokens", "", "900", "request_success", stop, "4", "request_success", abort, "3", "request_success", errs, "2"),
			engine0(0, "", "num_preemptions", "", "4", "prompt_tokens", "", "1000", "request_success", stop, "5", "request_success", abort, "3", "request_success", errs, "2"),
		}, []string{"preempt=- prompt=-", "preempt=3 prompt=900 abort=3 error=2 stop=4", "preempt=1 prompt=100 abort=0 error=0 stop=1"}},
		{"with _created each series follows its own", []string{
			engine0(100, "", "num_preemptions", "", "10", "prompt_tokens", "", "9000", "request_success", abort, "1"),
			engine0(100, "", "num_preemptions", "", "3", "prompt_tokens", "", "9100", "request_success", abort, "3"),
		}, []string{"preempt=- prompt=-", "preempt=3 prompt=100 abort=2"}},
		{"a series without a number at the restart counts whole at its next one", []string{
			engine0(0, "", "num_preemptions", "", "10", "prompt_tokens", "", "100"),
			engine0(0, "", "num_preemptions", "", "3", "prompt_tokens", "", "NaN"),
			engine0(0, "", "num_preemptions", "", "4", "prompt_tokens", "", "130"),
		}, []string{"preempt=- prompt=-", "preempt=3 prompt=-", "preempt=1 prompt=130"}},
		// A page that shows a worker's counters low and leaves a series out may not be its
		// process' page at all (a partial page): the series goes by its own values when it is
		// back, and shows a restart by going down, as always.
		{"a series absent at the restart goes by its own values when it is back", []string{
			engine0(0, "", "num_preemptions", "", "10", "request_success", abort, "1"),
			engine0(0, "", "num_preemptions", "", "3"),
			engine0(0, "", "num_preemptions", "", "4", "request_success", abort, "2"),
		}, []string{"preempt=- prompt=-", "preempt=3 prompt=-", "preempt=1 prompt=- abort=1"}},
		{"a series whose last number came after the falling one's may have restarted before it: new minus old", []string{
			engine0(0, "", "num_preemptions", "", "10", "prompt_tokens", "", "100"),
			engine0(0, "", "num_preemptions", "", "NaN", "prompt_tokens", "", "120"),
			engine0(0, "", "num_preemptions", "", "3", "prompt_tokens", "", "125"),
		}, []string{"preempt=- prompt=-", "preempt=- prompt=20", "preempt=3 prompt=5"}},
		{"a histogram down restarts the counters too", []string{
			engine0(0, ttft("2", "10", "50", "10", 0), "num_preemptions", "", "1"),
			engine0(0, ttft("1", "3", "4", "3", 0), "num_preemptions", "", "2"),
		}, []string{"preempt=- prompt=-", "preempt=2 prompt=- ttft 0.1:1 +Inf:3 s=4 n=3"}},
		{"a counter down restarts a histogram that went up", []string{
			engine0(0, ttft("2", "10", "50", "10", 0), "num_preemptions", "", "5"),
			engine0(0, ttft("3", "12", "60", "12", 0), "num_preemptions", "", "2"),
		}, []string{"preempt=- prompt=-", "preempt=2 prompt=- ttft 0.1:3 +Inf:12 s=60 n=12"}},
		{"a histogram with _created follows its own", []string{
			engine0(0, ttft("2", "10", "50", "10", 100), "num_preemptions", "", "5"),
			engine0(0, ttft("3", "12", "60", "12", 100), "num_preemptions", "", "2"),
		}, []string{"preempt=- prompt=-", "preempt=2 prompt=- ttft 0.1:1 +Inf:2 s=10 n=2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWorker()
			for i, pg := range tt.pages {
				if got := incs(observeText(t, w, pg, 150)); got != tt.want[i] {
					t.Fatalf("page %d:\n%s\nincreases %s, want %s", i, pg, got, tt.want[i])
				}
			}
		})
	}
}

// TestWorkerAbsentCountsWhole: a worker known not to have been there before its first page (its
// target's pages did not show it, its target's server refused every connection) made all of
// that page's counts since: they count whole, as a series new on a worker seen before does,
// with or without _created. Another worker's first page is a baseline unless _created dates it.
func TestWorkerAbsentCountsWhole(t *testing.T) {
	body := engine0(0, ttft("2", "10", "50", "10", 0), "num_preemptions", "", "6", "prompt_tokens", "", "5000")
	w := NewWorker()
	w.Absent()
	if got, want := incs(observeText(t, w, body, 0)), "preempt=6 prompt=5000 ttft 0.1:2 +Inf:10 s=50 n=10"; got != want {
		t.Errorf("absent worker's first page: %s, want %s", got, want)
	}
	w = NewWorker()
	inc := observeText(t, w, body, 0)
	if got, want := incs(inc), "preempt=- prompt=-"; got != want || !inc.Undated {
		t.Errorf("first page of a worker not known absent: %s (undated %v), want %s, undated", got, inc.Undated, want)
	}
	// A series that shows no number on the absent worker's first page counts whole at its first.
	w = NewWorker()
	w.Absent()
	observeText(t, w, engine0(0, "", "num_preemptions", "", "NaN"), 0)
	if got, want := incs(observeText(t, w, engine0(0, "", "num_preemptions", "", "7"), 0)), "preempt=7 prompt=-"; got != want {
		t.Errorf("absent worker, series NaN then 7: %s, want %s", got, want)
	}
}

// TestWorkerRestartedSaysSo: an increase says that the worker's process restarted when a series
// with a baseline went down or its _created changed, on the page that shows it, and only there:
// not on a worker's first page, not when a series is new, not when a histogram's layout alone
// changed.
func TestWorkerRestartedSaysSo(t *testing.T) {
	tests := []struct {
		name   string
		absent bool
		pages  []string
		want   []bool
	}{
		{"a counter down on pages without _created", false, []string{
			engine0(0, "", "num_preemptions", "", "10", "prompt_tokens", "", "900"),
			engine0(0, "", "num_preemptions", "", "3", "prompt_tokens", "", "950"),
			engine0(0, "", "num_preemptions", "", "4", "prompt_tokens", "", "1000"),
		}, []bool{false, true, false}},
		{"a counter down with _created unchanged", false, []string{
			engine0(100, "", "num_preemptions", "", "10"),
			engine0(100, "", "num_preemptions", "", "3"),
		}, []bool{false, true}},
		{"a _created changed, the counter above its old value", false, []string{
			engine0(100, "", "num_preemptions", "", "10"),
			engine0(200, "", "num_preemptions", "", "12"),
			engine0(200, "", "num_preemptions", "", "13"),
		}, []bool{false, true, false}},
		{"a counter down after a page without its number", false, []string{
			engine0(0, "", "num_preemptions", "", "10"),
			engine0(0, "", "num_preemptions", "", "NaN", "prompt_tokens", "", "5"),
			engine0(0, "", "num_preemptions", "", "4", "prompt_tokens", "", "6"),
		}, []bool{false, false, true}},
		{"a histogram down, the counters up", false, []string{
			engine0(0, ttft("2", "10", "50", "10", 0), "num_preemptions", "", "1"),
			engine0(0, ttft("1", "3", "4", "3", 0), "num_preemptions", "", "2"),
		}, []bool{false, true}},
		{"a histogram down with _created unchanged", false, []string{
			engine0(100, ttft("2", "10", "50", "10", 100), "num_preemptions", "", "1"),
			engine0(100, ttft("1", "3", "4", "3", 100), "num_preemptions", "", "2"),
		}, []bool{false, true}},
		{"a histogram's _created changed, its counts up", false, []string{
			engine0(0, ttft("2", "10", "50", "10", 100), "num_preemptions", "", "1"),
			engine0(0, ttft("3", "12", "60", "12", 200), "num_preemptions", "", "2"),
		}, []bool{false, true}},
		{"a histogram's layout changed, its counts up", false, []string{
			engine0(0, ttft("2", "10", "50", "10", 0), "num_preemptions", "", "1"),
			engine0(0, ttft("", "12", "60", "12", 0), "num_preemptions", "", "2"),
		}, []bool{false, false}},
		{"a new series, and a worker's first page with counts", true, []string{
			engine0(0, "", "num_preemptions", "", "10"),
			engine0(0, ttft("2", "10", "50", "10", 0), "num_preemptions", "", "11", "prompt_tokens", "", "7"),
		}, []bool{false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWorker()
			if tt.absent {
				w.Absent()
			}
			for i, pg := range tt.pages {
				if got := observeText(t, w, pg, 150).Restarted; got != tt.want[i] {
					t.Fatalf("page %d:\n%s\nrestarted %v, want %v", i, pg, got, tt.want[i])
				}
			}
		})
	}
}
