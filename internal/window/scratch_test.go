package window

import (
	"fmt"
	"testing"

	"github.com/vllmstat/vllmstat/internal/benchpage"
	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestWorkersSharingScratch observes two engines' pages scrape after scrape, each increase read
// before the next Observe (as the step tracker does), with workers sharing one scratch and with
// workers of their own: the increases are the same. Each scrape takes other values (a restart
// among them), so that one worker's increase left in the scratch would show in the other's.
func TestWorkersSharingScratch(t *testing.T) {
	base := testkit.ReadFixture(t, "prometheus-client-render-vllm-0.20.prom")
	var pages []*page.Page
	for k := range 8 {
		body := benchpage.Variant(base, k)
		if k == 5 {
			body = benchpage.Variant(base, 0) // lower values: a restart
		}
		pg, err := page.ParsePage(body)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, pg)
	}
	if len(pages[0].Engines) < 2 {
		t.Fatalf("the fixture has %d engines; the test needs two", len(pages[0].Engines))
	}
	var shared Scratch
	own := []*Worker{NewWorker(), NewWorker()}
	sharing := []*Worker{NewWorkerSharing(&shared), NewWorkerSharing(&shared)}
	for k := range pages {
		for e := range 2 {
			// The second engine's page is the first one's a scrape behind, so the two differ.
			ep := &pages[max(k-e, 0)].Engines[e]
			want := show(own[e].Observe(ep, 0))
			if got := show(sharing[e].Observe(ep, 0)); got != want {
				t.Fatalf("scrape %d, engine %d: sharing a scratch gave\n%s\nwant\n%s", k, e, got, want)
			}
		}
	}
}

// show spells out an increase, its histograms' buckets included.
func show(inc Increase) string {
	s := fmt.Sprintf("%v %v %v undated=%v\n", inc.Counters, inc.HasCounter, inc.Shares, inc.Undated)
	for h, d := range inc.Hists {
		if d != nil {
			s += fmt.Sprintf("%d: %s\n", h, fmtDelta(d))
		}
	}
	return s
}
