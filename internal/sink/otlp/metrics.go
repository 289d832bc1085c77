package otlp

import (
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/step"
)

// Scope is the instrumentation scope of every metric the sink sends.
const Scope = "github.com/vllmstat/vllmstat"

// Name is the OTLP metric name of a series that vllmstat's Prometheus names call family
// (promname.WalkStep's): its namespaces dotted, the engine's family as Prometheus spells it,
// "vllmstat_step_vllm_prefix_cache_hits" is "vllmstat.step.vllm_prefix_cache_hits". A
// collector that forwards to Prometheus turns the dots back into underscores, so a query reads
// the same series names as remote write's and vllmstat's /metrics.
func Name(family string) string {
	if rest, ok := strings.CutPrefix(family, promname.WorkerFamilyPrefix); ok {
		return "vllmstat.step.worker." + rest
	}
	if rest, ok := strings.CutPrefix(family, promname.StepFamilyPrefix); ok {
		return "vllmstat.step." + rest
	}
	return family
}

// Unit is the UCUM unit of a family, by the words its name ends with ("" when it names none):
// seconds s, rates per second /s, ratios and fractions 1, counts of tokens or requests in
// annotations.
func Unit(family string) string {
	has := func(s ...string) bool {
		for _, x := range s {
			if strings.HasSuffix(family, x) {
				return true
			}
		}
		return false
	}
	switch {
	case strings.Contains(family, "tokens_per_"):
		return "{token}/s"
	case has("_seconds"):
		return "s"
	case has("tflops_per_gpu", "tflops_per_gpu_generating"):
		return "TFLOP/s" // not UCUM: floating-point operations have no UCUM unit
	case has("gbps_per_gpu"):
		return "GBy/s"
	case has("_rate", "_perc", "_fraction", "_mfu", "_mbu", "_mfu_generating", "_imbalance", "_per_pos"):
		return "1"
	case has("_tokens"):
		return "{token}"
	case has("_requests", "_requests_running", "_requests_waiting", "_request_success"):
		return "{request}"
	case has("_preemptions"):
		return "{preemption}"
	case has("_workers"):
		return "{worker}"
	case has("_scrapes"):
		return "{scrape}"
	}
	return ""
}

// metrics turns step records into OTLP metrics.
//
// Every series is a gauge at the step's end, its value the step's, as steps.jsonl has it. A
// counter's step total is a delta of the step, but it stays a gauge: a store that reads OTLP
// through the collector's Prometheus exporters drops delta sums, and turned cumulative it
// would no longer be the step's value; and a counter's family also carries statistics (its
// per-interval mean, max and p95), which a sum could not share a name with.
type metrics struct {
	prefix string
	res    *resource.Resource
	scope  instrumentation.Scope
}

func newMetrics(prefix string, res *resource.Resource, version string) *metrics {
	return &metrics{prefix: prefix, res: res, scope: instrumentation.Scope{Name: Scope, Version: version}}
}

// record returns r's metrics: every series promname.WalkStep names, a data point each at r's
// end, the phase, statistic, split label and worker as attributes (those with a value). The
// step number is a gauge of its own (vllmstat.step.number), not an attribute: an attribute
// that changes every step would make every step a new series in every store.
func (m *metrics) record(r *step.Record) *metricdata.ResourceMetrics {
	var out []metricdata.Metrics
	index := map[string]int{}
	promname.WalkStep(m.prefix, r, func(family string, labels []promname.Label, v float64) {
		attrs := make([]attribute.KeyValue, 0, len(labels))
		for _, l := range labels {
			if l.Value != "" { // as remote write leaves out a label without a value
				attrs = append(attrs, attribute.String(l.Name, l.Value))
			}
		}
		name := Name(family)
		i, ok := index[name]
		if !ok {
			i = len(out)
			index[name] = i
			out = append(out, metricdata.Metrics{Name: name, Unit: Unit(family), Data: metricdata.Gauge[float64]{}})
		}
		g := out[i].Data.(metricdata.Gauge[float64])
		g.DataPoints = append(g.DataPoints, metricdata.DataPoint[float64]{Attributes: attribute.NewSet(attrs...), Time: r.End, Value: v})
		out[i].Data = g
	})
	return &metricdata.ResourceMetrics{Resource: m.res, ScopeMetrics: []metricdata.ScopeMetrics{{Scope: m.scope, Metrics: out}}}
}
