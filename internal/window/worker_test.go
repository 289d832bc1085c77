package window

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// scrape is one page of a worker's history and what Observe must return for it.
type scrape struct {
	page  string  // exposition text of one engine, engine="0"
	since float64 // the since passed to Observe
	// want is the increase of vllm:num_preemptions, or "-" for none (HasCounter false).
	want string
}

// preempt renders a num_preemptions sample with an optional _created (0 = none).
func preempt(v string, created float64) string {
	s := fmt.Sprintf("vllm:num_preemptions_total{engine=\"0\",model_name=\"m\"} %s\n", v)
	if created != 0 {
		s += fmt.Sprintf("vllm:num_preemptions_created{engine=\"0\",model_name=\"m\"} %v\n", created)
	}
	return s
}

// other is a different counter, so that a page without num_preemptions still shows the engine.
const other = "vllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} 5\n"

func observeText(t *testing.T, w *Worker, body string, since float64) Increase {
	t.Helper()
	p, err := page.ParsePage([]byte(body))
	if err != nil {
		t.Fatalf("parse %q: %v", body, err)
	}
	if len(p.Engines) != 1 {
		t.Fatalf("page %q: %d engines, want 1", body, len(p.Engines))
	}
	return w.Observe(&p.Engines[0], since)
}

func TestWorkerCounterRules(t *testing.T) {
	tests := []struct {
		name    string
		scrapes []scrape
	}{
		{"goes up", []scrape{{preempt("10", 0), 0, "-"}, {preempt("14", 0), 0, "4"}, {preempt("14", 0), 0, "0"}}},
		{"goes down: reset counted from the new value", []scrape{{preempt("10", 0), 0, "-"}, {preempt("3", 0), 0, "3"}}},
		{"_created changed, value above the old one", []scrape{{preempt("10", 100), 150, "-"}, {preempt("12", 200), 150, "12"}}},
		{"_created unchanged", []scrape{{preempt("10", 100), 150, "-"}, {preempt("12", 100), 150, "2"}}},
		{"first scrape, _created after since: all of it is new", []scrape{{preempt("10", 200), 150, "10"}, {preempt("11", 200), 150, "1"}}},
		{"first scrape, _created before since: a baseline", []scrape{{preempt("10", 100), 150, "-"}, {preempt("15", 100), 150, "5"}}},
		{"first scrape without _created: a baseline", []scrape{{preempt("10", 0), 150, "-"}, {preempt("15", 0), 150, "5"}}},
		{"series appearing on a seen worker started from zero", []scrape{{other, 0, "-"}, {other + preempt("7", 0), 0, "7"}}},
		{"NaN is absent, the increase lands when a finite value returns", []scrape{
			{preempt("100", 0), 0, "-"}, {preempt("110", 0), 0, "10"}, {preempt("NaN", 0), 0, "-"},
			{preempt("130", 0), 0, "20"}, {preempt("140", 0), 0, "10"}}},
		{"NaN on the first scrape: the first finite value is the baseline", []scrape{
			{preempt("NaN", 0), 0, "-"}, {preempt("130", 0), 0, "-"}, {preempt("140", 0), 0, "10"}}},
		{"NaN on the first scrape of an engine started after since", []scrape{
			{preempt("NaN", 200), 150, "-"}, {preempt("30", 200), 160, "30"}}},
		{"NaN when the series appears on a seen worker", []scrape{{other, 0, "-"}, {other + preempt("NaN", 0), 0, "-"}, {other + preempt("5", 0), 0, "5"}}},
		{"+Inf between numbers is no sample: the next number continues from the last one", []scrape{
			{preempt("800", 0), 0, "-"}, {preempt("+Inf", 0), 0, "-"}, {preempt("1400", 0), 0, "600"}, {preempt("1405", 0), 0, "5"}}},
		{"-Inf between numbers is no sample", []scrape{{preempt("100", 0), 0, "-"}, {preempt("-Inf", 0), 0, "-"}, {preempt("-Inf", 0), 0, "-"}, {preempt("130", 0), 0, "30"}}},
		{"-Inf, then a number below the last one: a reset", []scrape{{preempt("100", 0), 0, "-"}, {preempt("-Inf", 0), 0, "-"}, {preempt("30", 0), 0, "30"}}},
		{"+Inf on the first scrape: the first finite value is the baseline", []scrape{{preempt("+Inf", 0), 0, "-"}, {preempt("30", 0), 0, "-"}, {preempt("32", 0), 0, "2"}}},
		{"+Inf when the series appears on a seen worker", []scrape{{other, 0, "-"}, {other + preempt("+Inf", 0), 0, "-"}, {other + preempt("5", 0), 0, "5"}}},
		{"NaN _created is no _created", []scrape{{preempt("10", 100), 150, "-"}, {preempt("12", math.NaN()), 150, "2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWorker()
			for i, s := range tt.scrapes {
				inc := observeText(t, w, s.page, s.since)
				got := "-"
				if inc.HasCounter[vllm.Preemptions] {
					got = fmt.Sprint(inc.Counters[vllm.Preemptions])
				}
				if got != s.want {
					t.Fatalf("scrape %d (%q): increase %s, want %s", i, s.page, got, s.want)
				}
			}
		})
	}
}

// ttft renders a TTFT histogram: counts for le 0.1 and +Inf, sum, count and _created (0 = none).
// An empty string leaves a sample out.
func ttft(le01, inf, sum, count string, created float64) string {
	var b strings.Builder
	l := `engine="0",model_name="m"`
	if le01 != "" {
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{%s,le=\"0.1\"} %s\n", l, le01)
	}
	if inf != "" {
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{%s,le=\"+Inf\"} %s\n", l, inf)
	}
	if sum != "" {
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_sum{%s} %s\n", l, sum)
	}
	if count != "" {
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_count{%s} %s\n", l, count)
	}
	if created != 0 {
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_created{%s} %v\n", l, created)
	}
	return b.String()
}

// histStep is one page of a histogram history and the TTFT increase Observe must return:
// "le0.1 +Inf sum count", "-" for none, or "nosum le0.1 +Inf count".
type histStep struct {
	page  string
	since float64
	want  string
}

func fmtDelta(d *HistDelta) string {
	if d == nil {
		return "-"
	}
	var b strings.Builder
	if d.NoSum {
		b.WriteString("nosum ")
	}
	for _, bk := range d.Buckets {
		fmt.Fprintf(&b, "%v:%v ", bk.Le, bk.Count)
	}
	if d.NoSum {
		fmt.Fprintf(&b, "n=%v", d.Count)
	} else {
		fmt.Fprintf(&b, "s=%v n=%v", d.Sum, d.Count)
	}
	return b.String()
}

func TestWorkerHistogramRules(t *testing.T) {
	tests := []struct {
		name  string
		steps []histStep
	}{
		{"increase", []histStep{
			{ttft("2", "10", "50", "10", 0), 0, "-"},
			{ttft("3", "12", "53", "12", 0), 0, "0.1:1 +Inf:2 s=3 n=2"}}},
		{"_count down", []histStep{
			{ttft("2", "10", "50", "10", 0), 0, "-"},
			{ttft("2", "10", "50", "9", 0), 0, "0.1:2 +Inf:10 s=50 n=9"}}},
		{"a bucket down, _count up, no _created", []histStep{
			{ttft("2", "10", "50", "10", 0), 0, "-"},
			{ttft("0", "12", "3", "12", 0), 0, "0.1:0 +Inf:12 s=3 n=12"}}},
		{"the +Inf bucket down", []histStep{
			{ttft("2", "10", "50", "10", 0), 0, "-"},
			{ttft("2", "9", "55", "11", 0), 0, "0.1:2 +Inf:9 s=55 n=11"}}},
		{"_sum down, the rest up", []histStep{
			{ttft("2", "10", "50", "10", 0), 0, "-"},
			{ttft("3", "12", "3", "12", 0), 0, "0.1:3 +Inf:12 s=3 n=12"}}},
		{"_created changed, every value above the old one", []histStep{
			{ttft("2", "10", "50", "10", 100), 150, "-"},
			{ttft("3", "12", "60", "12", 200), 150, "0.1:3 +Inf:12 s=60 n=12"}}},
		{"layout changed", []histStep{
			{ttft("2", "10", "50", "10", 0), 0, "-"},
			{ttft("", "12", "60", "12", 0), 0, "+Inf:12 s=60 n=12"}}},
		{"first scrape, _created after since", []histStep{
			{ttft("2", "10", "50", "10", 200), 150, "0.1:2 +Inf:10 s=50 n=10"}}},
		{"first scrape, _created before since", []histStep{
			{ttft("2", "10", "50", "10", 100), 150, "-"},
			{ttft("2", "11", "51", "11", 100), 150, "0.1:0 +Inf:1 s=1 n=1"}}},
		{"series appearing on a seen worker", []histStep{
			{other, 0, "-"},
			{other + ttft("2", "10", "50", "10", 0), 0, "0.1:2 +Inf:10 s=50 n=10"}}},
		{"NaN sum: absent, the old values stay the baseline", []histStep{
			{ttft("2", "10", "50", "10", 0), 0, "-"},
			{ttft("3", "11", "NaN", "11", 0), 0, "-"},
			{ttft("4", "12", "52", "12", 0), 0, "0.1:2 +Inf:2 s=2 n=2"}}},
		{"NaN bucket", []histStep{
			{ttft("2", "10", "50", "10", 0), 0, "-"},
			{ttft("NaN", "11", "51", "11", 0), 0, "-"},
			{ttft("2", "12", "52", "12", 0), 0, "0.1:0 +Inf:2 s=2 n=2"}}},
		{"+Inf count: no sample, the next finite values continue from the last ones", []histStep{
			{ttft("2", "10", "50", "10", 0), 0, "-"},
			{ttft("2", "10", "50", "+Inf", 0), 0, "-"},
			{ttft("3", "11", "51", "11", 0), 0, "0.1:1 +Inf:1 s=1 n=1"}}},
		{"-Inf bucket, then values below the last ones: a reset", []histStep{
			{ttft("2", "10", "50", "10", 0), 0, "-"},
			{ttft("-Inf", "10", "50", "10", 0), 0, "-"},
			{ttft("1", "4", "9", "4", 0), 0, "0.1:1 +Inf:4 s=9 n=4"}}},
		{"no _count: taken from the +Inf bucket", []histStep{
			{ttft("2", "10", "50", "", 0), 0, "-"},
			{ttft("3", "14", "53", "", 0), 0, "0.1:1 +Inf:4 s=3 n=4"}}},
		{"no +Inf bucket: one holding _count", []histStep{
			{ttft("2", "", "50", "10", 0), 0, "-"},
			{ttft("3", "", "53", "14", 0), 0, "0.1:1 +Inf:4 s=3 n=4"}}},
		{"no _sum", []histStep{
			{ttft("2", "10", "", "10", 0), 0, "-"},
			{ttft("3", "14", "", "14", 0), 0, "nosum 0.1:1 +Inf:4 n=4"}}},
		{"neither _count nor +Inf: not read", []histStep{
			{other + ttft("2", "", "50", "", 0), 0, "-"},
			{other + ttft("3", "", "53", "", 0), 0, "-"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWorker()
			for i, s := range tt.steps {
				inc := observeText(t, w, s.page, s.since)
				if got := fmtDelta(inc.Hists[vllm.TTFT]); got != s.want {
					t.Fatalf("scrape %d:\n%s\nincrease %s, want %s", i, s.page, got, s.want)
				}
			}
		})
	}
}

// TestWorkerNeverNegative feeds random histories of one counter and one histogram, with
// restarts, NaN and ±Inf, and checks that no increase is negative or non-finite.
func TestWorkerNeverNegative(t *testing.T) {
	vals := []string{"0", "1", "2", "5", "9", "NaN", "+Inf", "-Inf"}
	for seed := range 300 {
		w := NewWorker()
		x := uint64(seed)*2654435761 + 1
		pick := func() string {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			return vals[x%uint64(len(vals))]
		}
		for range 20 {
			body := preempt(pick(), 0) + ttft(pick(), pick(), pick(), pick(), 0)
			inc := observeText(t, w, body, 0)
			if v := inc.Counters[vllm.Preemptions]; v < 0 || !finite(v) {
				t.Fatalf("seed %d: counter increase %v on\n%s", seed, v, body)
			}
			if d := inc.Hists[vllm.TTFT]; d != nil {
				for _, v := range append([]float64{d.Sum, d.Count}, func() (cs []float64) {
					for _, b := range d.Buckets {
						cs = append(cs, b.Count)
					}
					return
				}()...) {
					if v < 0 || !finite(v) {
						t.Fatalf("seed %d: histogram increase %s on\n%s", seed, fmtDelta(d), body)
					}
				}
			}
		}
	}
}

// TestSeriesKeysKeepIncreasesApart checks that series whose label values hold commas, equals
// signs and quotes, which the page keeps apart, are kept apart by the worker too.
func TestSeriesKeysKeepIncreasesApart(t *testing.T) {
	for _, pair := range [][2]string{
		{`x="a,y=b"`, `x="a",y="b"`},
		{`x="a\",y=\"b"`, `x="a",y="b"`},
		{`x="a\\",y="b"`, `x="a\\\",y=\"b"`},
	} {
		w := NewWorker()
		observeText(t, w, fmt.Sprintf("vllm:num_preemptions_total{engine=\"0\",%s} 0\nvllm:num_preemptions_total{engine=\"0\",%s} 0\n", pair[0], pair[1]), 0)
		inc := observeText(t, w, fmt.Sprintf("vllm:num_preemptions_total{engine=\"0\",%s} 100\nvllm:num_preemptions_total{engine=\"0\",%s} 10\n", pair[0], pair[1]), 0)
		if inc.Counters[vllm.Preemptions] != 110 {
			t.Errorf("%s and %s: increase %v, want 110", pair[0], pair[1], inc.Counters[vllm.Preemptions])
		}
	}
}
