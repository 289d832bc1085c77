package termline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/step"
)

// TestSGLangTokenizerLeftOut: an SGLang server with data parallelism is a worker per DP rank
// and one for its tokenizer, whose series (the server's tokens and requests) have no engine
// gauge. The lines of the engines' gauges leave it out, and one line says why; a metric it has
// draws it.
func TestSGLangTokenizerLeftOut(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "page", "testdata", "prometheus-client-render-sglang-tp2-pp2-dp2.prom"))
	if err != nil {
		t.Fatal(err)
	}
	const tg = "http://10.0.0.7:30000/metrics"
	tr := step.NewTracker(step.Options{})
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for i := range 4 {
		pg, err := page.ParsePage(body)
		if err != nil {
			t.Fatal(err)
		}
		tr.Observe(start.Add(time.Duration(i)*time.Second), tg, pg, nil)
	}
	r := tr.EndStep(1, start.Add(4*time.Second))
	if r.Timeline == nil || len(r.Timeline.Workers) != 3 {
		t.Fatalf("timeline %+v: want the tokenizer and 2 DP ranks", r.Timeline)
	}
	lines := Lines(&r, Options{Width: 100})
	text := strings.Join(lines, "\n")
	for _, l := range lines {
		if _, bars, ok := strings.Cut(l, "│"); ok && strings.Trim(bars[:strings.LastIndex(bars, "│")], string(NoSample)) == "" {
			t.Errorf("a line of no samples: %q", l)
		}
	}
	if n := strings.Count(text, "30000[dp_rank="); n != 4 {
		t.Errorf("%d lines of DP ranks, want 2 per metric:\n%s", n, text)
	}
	if want := "1 worker left out: no engine gauges, only a server's counts (SGLang's tokenizer, with data parallelism)"; lines[len(lines)-2] != want {
		t.Errorf("last line but one %q, want %q", lines[len(lines)-2], want)
	}
	// The same page four times: its log-point figures were never refreshed, and the 3 s of
	// the rank that shows running requests are undetermined, of the ranks' 6 s.
	if want := "sglang: 3.0 engine-s undetermined (50%): the pages repeated an old log point of SGLang's scheduler, generating or idle; their running requests may be stale"; lines[len(lines)-1] != want {
		t.Errorf("last line %q, want %q", lines[len(lines)-1], want)
	}
	// The tokenizer has the server's prompt tokens: drawn where they are asked for.
	lines = Lines(&r, Options{Width: 100, Metrics: []string{"prompt_tokens"}})
	if text = strings.Join(lines, "\n"); strings.Contains(text, "left out") || len(lines) != 5 {
		t.Errorf("the prompt tokens' lines:\n%s", text)
	}
}
