package snap

import (
	"time"
)

// pageState is what one server's page shows, copied out of the simulation and the HTTP side so
// that rendering needs no lock.
type PageState struct {
	Engines []EngineStats
	// createdAt is the Unix time the server (re)started: every _created sample and
	// process_start_time_seconds.
	CreatedAt float64
	// uptime is wall seconds since then; the process and Python families grow with it.
	Uptime float64
	Http   HttpStats
	// restarts counts the server's restarts, which give an SGLang page's processes new pids.
	Restarts int
	// epoch is the Unix time of simulated time 0 and speed the simulation's, which date the
	// children that appear while the server runs.
	Epoch, Speed float64
}

// unixOf is the Unix time of simulated time d.
func (st *PageState) UnixOf(d time.Duration) float64 { return st.Epoch + d.Seconds()/st.Speed }

// httpStats are the counts the API server's HTTP instrumentation keeps, apart from
// /v1/completions, whose count is the engines' finished requests.
type HttpStats struct {
	Metrics, Health int64
	WeightInfo      int64 // GET /weight_info, served by a fleet that syncs weights
	Duration        DynHistogram
}

// dynHistogram is a histogram with a slice of counts, for the HTTP duration histogram, which
// has more buckets than engine histograms allow.
type DynHistogram struct {
	Counts []uint64
	Sum    float64
	count  uint64
}

func (h *DynHistogram) Observe(bounds []float64, v float64) {
	if h.Counts == nil {
		h.Counts = make([]uint64, len(bounds)+1)
	}
	i := 0
	for i < len(bounds) && v > bounds[i] {
		i++
	}
	h.Counts[i]++
	h.Sum += v
	h.count++
}

func (h *DynHistogram) CopyFrom(o *DynHistogram) {
	h.Counts = append(h.Counts[:0], o.Counts...)
	h.Sum, h.count = o.Sum, o.count
}

// httpDurationBounds are prometheus-fastapi-instrumentator's "highr" buckets: 0.01 to 0.59 in
// steps of 0.01 (computed by multiplication, as Python does, hence 0.35000000000000003), then
// a few coarse ones.
var HttpDurationBounds = func() []float64 {
	var b []float64
	step := 0.01
	for i := 1; i < 60; i++ {
		b = append(b, float64(i)*step)
	}
	return append(b, 1, 2, 5, 10, 30, 60)
}()

// pageRenderer writes one server's page.
type PageRenderer interface {
	Render(dst []byte, st *PageState) []byte
}
