package step

import (
	"slices"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
	"github.com/vllmstat/vllmstat/internal/window"
)

// Each scrape's values for Options.OnInterval (live views, per-interval exports) are made from
// the page and the increases that Observe adds to the step, as it observes them, into one slice
// the tracker reuses from one Interval to the next.

// Interval is one worker's values at one successful scrape: its gauges, the counter increases
// since its previous successful scrape, the interval's hit rate, and token rates over DT.
type Interval struct {
	WorkerID
	// Kind is the worker's engine kind: its keys begin with vllm.EnginePrefix(prefix, Kind).
	Kind vllm.Engine
	TS   time.Time
	// DT is the time since the worker's previous successful scrape; 0 on its first.
	DT float64
	// Values are keyed like timeline series: "num_requests_running", "kv_cache_usage_perc",
	// "num_preemptions", "prefix_cache_hit_rate", "generation_tokens_per_s", ...; each key once,
	// in the spec's order (gauges, counters, ratios, rates).
	Values []IntervalValue
	// TargetLabels are the labels discovery gave the worker's target (see SetTargetLabels);
	// shared, read only.
	TargetLabels map[string]string
}

// IntervalValue is one value of an Interval.
type IntervalValue struct {
	Key string
	V   float64
}

// Value returns the value of key, and whether the interval has one.
func (iv *Interval) Value(key string) (float64, bool) {
	for _, v := range iv.Values {
		if v.Key == key {
			return v.V, true
		}
	}
	return 0, false
}

// Clone returns iv with Values of its own, for a consumer of Options.OnInterval that keeps it.
func (iv Interval) Clone() Interval {
	iv.Values = slices.Clone(iv.Values)
	return iv
}

// interval is a worker's Interval at ts, before ws records this scrape.
func (t *Tracker) interval(id WorkerID, ws *workerState, ts time.Time, ep *page.EnginePage, inc *window.Increase) Interval {
	vs := t.values[:0]
	add := func(k string, v float64) { vs = append(vs, IntervalValue{k, v}) }
	var dt float64
	if ws.seen {
		dt = ts.Sub(ws.seenAt).Seconds()
	}
	for g, f := range vllm.Gauges {
		if ep.HasGauge[g] && f.Timeline {
			add(f.Name, ep.Gauges[g])
		}
	}
	// An increase beyond the float limit is no value, and neither is anything computed from it.
	for c, f := range vllm.Counters {
		if inc.HasCounter[c] && f.Timeline && finite(inc.Counters[c]) {
			add(f.Name, inc.Counters[c])
		}
	}
	for _, rt := range vllm.Ratios {
		if v, ok := ratio(rt, &inc.Counters, &inc.HasCounter); ok && rt.Timeline && finite(v) {
			add(rt.Name, v)
		}
	}
	if dt > 0 {
		for i, rt := range vllm.Rates {
			if v := inc.Counters[rt.Of] / dt; inc.HasCounter[rt.Of] && finite(v) {
				add(rateNames[i], v)
			}
		}
	}
	t.values = vs
	return Interval{WorkerID: id, Kind: ep.Kind, TS: ts, DT: dt, Values: vs, TargetLabels: t.labels.of(id.Target)}
}

// rateNames are the names of vllm.Rates, made once.
var rateNames = func() []string {
	names := make([]string, len(vllm.Rates))
	for i, rt := range vllm.Rates {
		names[i] = rt.Name()
	}
	return names
}()
