package vllmpage

import (
	"strings"

	"github.com/vllmstat/vllmstat/internal/sim/promtext"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// A vLLM server with more than one API server process (vllm serve --api-server-count N) runs
// prometheus_client in multiprocess mode: vLLM sets PROMETHEUS_MULTIPROC_DIR
// (vllm/v1/metrics/prometheus.py, setup_multiprocess_prometheus) and serves a registry holding
// only a MultiProcessCollector (get_prometheus_registry), which merges the files every process
// writes. So the page has no process or Python families and no _created samples; each counter
// and histogram child is the sum over the processes (each API server's PrometheusStatLogger
// counts the requests it serves and the scheduler stats that reach it, which add up to the
// engine's); and a gauge is merged by its multiprocess_mode. vLLM declares every gauge of its
// logger "mostrecent": the page shows the last value set by any process, and a child no process
// has set yet not at all (prometheus_client skips a value of timestamp 0), its family keeping
// HELP and TYPE. The sleep state is set when the logger starts (record_sleep_state) and the
// cache config when the engine is up (log_engine_initialized); the scheduler gauges when the
// first scheduler stats arrive, at the engine's first iteration.
//
// prometheus_client lists the families in the order it reads them: the processes' counter
// files, then their gauge files, then their histogram files (in the order of the directory's
// glob; here sorted), each family where its first child was written, which is the order vLLM's
// logger creates them, the HTTP instrumentation's after vLLM's. It lists each histogram child's
// _sum, its cumulative buckets and its _count together (prometheus_client 0.20 and later).
//
// The simulated processes are not told apart: a page's counters are the engine's, whichever
// process counted them. A server restart starts a new multiprocess directory, and every count
// from zero.

// mpHistograms are the 0.20 histogram families in the order PrometheusStatLogger creates them.
var mpHistograms = []string{
	"vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vllm:iteration_tokens_total",
	"vllm:request_max_num_generation_tokens", "vllm:request_params_n", "vllm:request_params_max_tokens",
	"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
	"vllm:request_time_per_output_token_seconds", "vllm:e2e_request_latency_seconds",
	"vllm:request_queue_time_seconds", "vllm:request_inference_time_seconds",
	"vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
	"vllm:request_prefill_kv_computed_tokens",
}

// mpRenderer writes a server's page in multiprocess mode, with the families of its version.
type mpRenderer struct {
	*renderer
	counters, gauges, hists []*family
}

func newMultiprocessRenderer(r *renderer) *mpRenderer {
	m := &mpRenderer{renderer: r}
	var spec []*family
	byName := map[string]*family{}
	for i := range r.v.families {
		f := &r.v.families[i]
		byName[f.name] = f
		switch {
		case f.kind == famCounter && strings.HasPrefix(f.name, "vllm:spec_decode_"):
			spec = append(spec, f)
		case f.kind == famCounter:
			m.counters = append(m.counters, f)
		case f.kind == famGauge || f.kind == famInfo:
			m.gauges = append(m.gauges, f)
		}
	}
	// SpecDecodingProm is built before the logger's own families.
	m.counters = append(spec, m.counters...)
	for _, name := range mpHistograms {
		if f := byName[name]; f != nil {
			m.hists = append(m.hists, f)
		}
	}
	return m
}

// mpGaugeAlwaysSet are the gauges vLLM sets at start-up rather than from scheduler stats.
var mpGaugeAlwaysSet = map[string]bool{famSleepState.name: true, famCacheConfig.name: true}

func (m *mpRenderer) Render(dst []byte, st *snap.PageState) []byte {
	for _, f := range m.counters {
		dst = promtext.AppendHelp(dst, f.name+"_total", f.help, "counter")
		dst = m.counterChildren(dst, f, st, "_total", false)
	}
	dst = m.appendHTTPRequests(dst, st)
	for _, f := range m.gauges {
		if f.kind == famInfo || mpGaugeAlwaysSet[f.name] {
			dst = m.appendFamily(dst, f, st)
			continue
		}
		dst = promtext.AppendHelp(dst, f.name, f.help, "gauge")
		for j := range max(len(f.extraValues), 1) {
			for i := range st.Engines {
				if !st.Engines[i].Recorded {
					continue
				}
				ls := m.engineLabels(i)
				if f.extraLabel != "" {
					ls.Add(f.extraLabel, f.extraValues[j])
				}
				dst = promtext.AppendSample(dst, f.name, "", &ls, "", f.value(&st.Engines[i], j))
			}
		}
	}
	for _, f := range m.hists {
		dst = promtext.AppendHelp(dst, f.name, f.help, "histogram")
		les := m.les[f.buckets]
		for i := range st.Engines {
			ls := m.engineLabels(i)
			dst = promtext.AppendMultiprocessHistogram(dst, f.name, &ls, les, f.hist(&st.Engines[i]))
		}
	}
	return m.appendHTTPDuration(dst, st)
}

// appendHTTPRequests writes the HTTP instrumentation's request counter: a handler's child is
// written at its first request.
func (m *mpRenderer) appendHTTPRequests(dst []byte, st *snap.PageState) []byte {
	var completions int64
	for i := range st.Engines {
		for _, n := range st.Engines[i].Success {
			completions += n
		}
	}
	dst = promtext.AppendHelp(dst, "http_requests_total", "Total number of requests by method, status and handler.", "counter")
	for _, h := range []struct {
		path, method string
		n            int64
	}{
		{"/v1/completions", "POST", completions},
		{"/metrics", "GET", st.Http.Metrics},
		{"/health", "GET", st.Http.Health},
	} {
		if h.n == 0 {
			continue
		}
		var ls promtext.LabelSet
		ls.Add("handler", h.path)
		ls.Add("method", h.method)
		ls.Add("status", "2xx")
		dst = promtext.AppendSample(dst, "http_requests", "_total", &ls, "", float64(h.n))
	}
	return dst
}

// appendHTTPDuration writes the HTTP duration histogram, which has no labels, so exists from
// start-up.
func (m *mpRenderer) appendHTTPDuration(dst []byte, st *snap.PageState) []byte {
	const name = "http_request_duration_highr_seconds"
	dst = promtext.AppendHelp(dst, name, "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. ", "histogram")
	var none promtext.LabelSet
	counts := st.Http.Duration.Counts
	if counts == nil {
		counts = make([]uint64, len(m.httpLes))
	}
	dst = promtext.AppendSample(dst, name, "_sum", &none, "", st.Http.Duration.Sum)
	var cum uint64
	for i, le := range m.httpLes {
		cum += counts[i]
		dst = promtext.AppendSample(dst, name, "_bucket", &none, le, float64(cum))
	}
	return promtext.AppendSample(dst, name, "_count", &none, "", float64(cum))
}
