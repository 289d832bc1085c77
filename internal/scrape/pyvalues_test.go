package scrape

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/target"
)

// valuesEngineScript serves two engines' vLLM 0.20 families from prometheus_client's default
// registry with expose()'s page, and changes them on stdin's commands: "change" moves every
// sample (histograms observe a value of varied buckets, gauges take fractions), "child" adds an
// engine's series to a counter family (the page's layout changes), "reset" replaces a counter
// family with a new one (its _created changes).
const valuesEngineScript = `
import random, sys
sys.path.insert(0, "../../clients/python")
sys.path.insert(0, "../../bench/engine")
import vllmpage
from prometheus_client import REGISTRY, Counter, Gauge, Histogram
with open("../testkit/testdata/prometheus-client-render-vllm-0.20.prom") as f:
    vllmpage.build(f.read(), populated=True, registry=REGISTRY, engines=2)
import vllmstat
url = vllmstat.expose(vllmstat="http://127.0.0.1:9", host="127.0.0.1")
print(url, flush=True)
rnd = random.Random(7)
def kids(kind):
    out = []
    for c in list(REGISTRY._collector_to_names):
        if type(c) is kind:
            out += list(c._metrics.values()) if c._labelnames else [c]
    return out
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "change":
        for c in kids(Counter):
            c.inc(rnd.choice([1, 3, 0.25]))
        for g in kids(Gauge):
            g.set(rnd.choice([0.0, 0.5, 12.0, 1.0 / 3]))
        for h in kids(Histogram):
            h.observe(rnd.choice(h._upper_bounds[:-1] + [1e9]) * rnd.random())
    elif cmd == "child":
        for c in list(REGISTRY._collector_to_names):
            if type(c) is Counter and c._name == "vllm:prompt_tokens":
                c.labels(**{n: ("9" if n == "engine" else "m") for n in c._labelnames}).inc(5)
    print("ok", flush=True)
`

// TestValuesAnswerOfPythonPage scrapes expose()'s page as vllmstat does, values answers and all,
// while every sample changes, and checks each page against the text answer to the same query
// without the layout header: the same engines, series and values. A new series changes the
// layout, which comes again.
func TestValuesAnswerOfPythonPage(t *testing.T) {
	needPromClient(t)
	cmd := exec.Command(python, "-c", valuesEngineScript)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	cmd.Stderr = io.Discard // expose()'s registration with a vllmstat that is not there
	in, outPipe := startPiped(t, cmd)
	out := bufio.NewScanner(outPipe)
	if !out.Scan() {
		t.Fatalf("the engine's process printed no URL: %v", out.Err())
	}
	url := strings.TrimSpace(out.Text())
	do := func(c string) {
		t.Helper()
		if _, err := io.WriteString(in, c+"\n"); err != nil || !out.Scan() || out.Text() != "ok" {
			t.Fatalf("%s: %v %q", c, err, out.Text())
		}
	}

	opt := Options{Timeout: 5 * time.Second, RequestNames: true, Logger: slog.New(slog.DiscardHandler)}
	opt = opt.withDefaults()
	s := newScraper(context.Background(), target.Target{URL: url}, &opt)
	// text is the page's text answer to the restricted query, without the layout header.
	text := func() *page.Page {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, s.req.restrictedURL().String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", acceptPage)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || isValuesAnswer(resp.Header.Get("Content-Type")) {
			t.Fatalf("text answer: %v, status %d, %s", err, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		pg, err := page.ParsePage(b)
		if err != nil {
			t.Fatal(err)
		}
		return pg
	}

	first := s.scrape() // the full page, to learn the names the target has
	if first.Err() != nil || s.req.layout != nil {
		t.Fatalf("first scrape: %v (layout held %v)", first.Err(), s.req.layout != nil)
	}
	first.Page.Release()
	var ids []string
	for round := range 8 {
		do("change")
		if round == 5 {
			do("child")
		}
		res := s.scrape()
		if res.Err() != nil {
			t.Fatalf("round %d: %v", round, res.Err())
		}
		if s.req.layout == nil {
			t.Fatalf("round %d: the page did not answer values", round)
		}
		if n := len(ids); n == 0 || ids[n-1] != s.req.layout.id {
			ids = append(ids, s.req.layout.id)
		}
		want := text()
		if !samePage(res.Page, want) {
			t.Fatalf("round %d: the values answer's page differs from the text answer's:\n%+v\nwant\n%+v", round, res.Page.Engines, want.Engines)
		}
		if n := 2 + min(1, round/5); len(res.Page.Engines) != n { // engine 9 came with the series
			t.Fatalf("round %d: %d engines, want %d", round, len(res.Page.Engines), n)
		}
		res.Page.Release()
		want.Release()
	}
	if len(ids) != 2 {
		t.Fatalf("layouts %v: want one, then another once a series was added", ids)
	}
}
