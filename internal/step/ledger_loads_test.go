package step

import (
	"fmt"
	"strings"
	"testing"
)

// TestManyLoadSourcesSaturate: a page shows 8,193 sources of SGLang's weight loads new at one
// scrape, each as long as the longest load a source may count for. Their nanoseconds added up
// pass an int64; the loads are bounded as one, so the whole step before the scrape is
// loading_weights, the states still add up to engine_s, and none is negative.
func TestManyLoadSourcesSaturate(t *testing.T) {
	lbl := `engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"`
	pg := func(running float64, load string) string {
		var b strings.Builder
		b.WriteString(sglangPage(sgl{running: running}))
		for i := range 8193 {
			fmt.Fprintf(&b, "sglang:weight_load_duration_seconds{%s,source=\"s%d\"} %s\n", lbl, i, load)
		}
		return b.String()
	}
	tr := NewTracker(Options{PerWorker: true})
	observeText(t, tr, 0, pg(1, "1"))
	observeText(t, tr, 1, pg(1, "1"))
	observeText(t, tr, 2, pg(1, "1e9"))
	r := tr.EndStep(1, at(2))
	wantLedger(t, r.Metrics, "sglang", map[State]float64{LoadingWeights: 2})
	wantLedger(t, r.PerWorker[0].Metrics, "sglang", map[State]float64{LoadingWeights: 2})
}
