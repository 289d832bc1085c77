package routerpage

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The router's own metrics, as sgl-model-gateway names, types and labels them
// (src/observability/metrics.rs: init_metrics' descriptions and the Metrics::record_* calls of
// its HTTP router, src/routers/http/router.rs route_typed_request): those its regular HTTP
// router records for the requests the simulator routes. metrics-exporter-prometheus writes
// only the series that were recorded, so a family appears with its first sample; its default
// buckets for every "*duration_seconds" histogram are durationBuckets (start_prometheus).
//
// Not kept: the gRPC-only, discovery, MCP, database, rate-limit and circuit-breaker state
// families, which nothing the simulator does records; the router's upstream-responses counter,
// whose error_code the simulated servers' answers do not carry; the retry backoff, which the
// exporter writes as a summary; and the gauges of active connections and requests.
var routerFamilies = map[string]struct{ typ, help string }{
	"smg_http_requests_total":             {"counter", "Total HTTP requests by method and path"},
	"smg_http_request_duration_seconds":   {"histogram", "HTTP request duration by method and path"},
	"smg_router_requests_total":           {"counter", "Total routed requests by router_type, backend_type, connection_mode, model, endpoint, streaming"},
	"smg_router_request_duration_seconds": {"histogram", "Router request duration by router_type, backend_type, connection_mode, model, endpoint"},
	"smg_router_request_errors_total":     {"counter", "Router errors by router_type, backend_type, connection_mode, model, endpoint, error_type"},
	"smg_worker_selection_total":          {"counter", "Worker selection events by worker_type, connection_mode, model, policy"},
	"smg_worker_errors_total":             {"counter", "Worker-level errors by worker_type, connection_mode, error_type"},
	"smg_worker_cb_outcomes_total":        {"counter", "Circuit breaker outcomes by worker and outcome (success/failure)"},
	"smg_worker_retries_total":            {"counter", "Total retry attempts by worker_type and endpoint"},
	"smg_worker_retries_exhausted_total":  {"counter", "Requests that exhausted all retries by worker_type and endpoint"},
}

// durationBuckets are the router's buckets of every histogram whose name ends in
// "duration_seconds" (start_prometheus).
var durationBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 45, 60, 90, 120, 180, 240}

// The labels' fixed values of the regular HTTP router (metrics_labels in metrics.rs).
const (
	routerHTTP     = "http"
	backendRegular = "regular"
	connectionHTTP = "http"
	workerRegular  = "regular"
)

// Metrics is the router's own metrics: the record methods are the gateway's Metrics::record_*
// the simulated router calls, Page writes them. Safe for concurrent use.
type Metrics struct {
	mu     sync.Mutex
	series map[string]*series // by name and label pairs
}

// series is one counter, gauge or histogram series.
type series struct {
	name   string
	labels [][2]string // in the order the gateway's macro call gives them
	value  float64     // a counter's or gauge's
	counts []uint64    // a histogram's per bucket, not cumulative
	sum    float64
	count  uint64
}

func NewMetrics() *Metrics { return &Metrics{series: map[string]*series{}} }

func (m *Metrics) get(name string, labels ...string) *series {
	var key strings.Builder
	key.WriteString(name)
	pairs := make([][2]string, 0, len(labels)/2)
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, [2]string{labels[i], labels[i+1]})
		key.WriteString("\xff" + labels[i] + "\xfe" + labels[i+1])
	}
	s := m.series[key.String()]
	if s == nil {
		s = &series{name: name, labels: pairs}
		m.series[key.String()] = s
	}
	return s
}

func (m *Metrics) add(v float64, name string, labels ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.get(name, labels...).value += v
}

func (m *Metrics) observe(v float64, name string, labels ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.get(name, labels...)
	if s.counts == nil {
		s.counts = make([]uint64, len(durationBuckets))
	}
	if i, _ := slices.BinarySearch(durationBuckets, v); i < len(durationBuckets) {
		s.counts[i]++
	}
	s.sum += v
	s.count++
}

// HTTPRequest is record_http_request and record_http_duration, which the gateway's HTTP
// middleware calls for every request to its main port.
func (m *Metrics) HTTPRequest(method, path string, d time.Duration) {
	m.add(1, "smg_http_requests_total", "method", method, "path", path)
	m.observe(d.Seconds(), "smg_http_request_duration_seconds", "method", method, "path", path)
}

// RouterRequest is record_router_request, at a generation request's arrival.
func (m *Metrics) RouterRequest(model, endpoint string, streaming bool) {
	m.add(1, "smg_router_requests_total", "router_type", routerHTTP, "backend_type", backendRegular,
		"connection_mode", connectionHTTP, "model", model, "endpoint", endpoint, "streaming", strconv.FormatBool(streaming))
}

// RouterDuration is record_router_duration, of a request answered with success.
func (m *Metrics) RouterDuration(model, endpoint string, d time.Duration) {
	m.observe(d.Seconds(), "smg_router_request_duration_seconds", "router_type", routerHTTP, "backend_type", backendRegular,
		"connection_mode", connectionHTTP, "model", model, "endpoint", endpoint)
}

// RouterError is record_router_error, of a request answered with a status the router does not
// retry.
func (m *Metrics) RouterError(model, endpoint, errorType string) {
	m.add(1, "smg_router_request_errors_total", "router_type", routerHTTP, "backend_type", backendRegular,
		"connection_mode", connectionHTTP, "model", model, "endpoint", endpoint, "error_type", errorType)
}

// WorkerSelection is record_worker_selection, at every choice of a worker.
func (m *Metrics) WorkerSelection(model, policy string) {
	m.add(1, "smg_worker_selection_total", "worker_type", workerRegular, "connection_mode", connectionHTTP, "model", model, "policy", policy)
}

// WorkerError is record_worker_error, of a worker's 5xx answer.
func (m *Metrics) WorkerError(errorType string) {
	m.add(1, "smg_worker_errors_total", "worker_type", workerRegular, "connection_mode", connectionHTTP, "error_type", errorType)
}

// WorkerOutcome is record_worker_cb_outcome, which the worker's circuit breaker records for
// every answer of a request that does not stream: the router's count of the requests each
// worker processed, with their outcome.
func (m *Metrics) WorkerOutcome(worker string, success bool) {
	outcome := "failure"
	if success {
		outcome = "success"
	}
	m.add(1, "smg_worker_cb_outcomes_total", "worker", worker, "outcome", outcome)
}

// Retry is record_worker_retry, before each retry.
func (m *Metrics) Retry(endpoint string) {
	m.add(1, "smg_worker_retries_total", "worker_type", workerRegular, "endpoint", endpoint)
}

// RetriesExhausted is record_worker_retries_exhausted.
func (m *Metrics) RetriesExhausted(endpoint string) {
	m.add(1, "smg_worker_retries_exhausted_total", "worker_type", workerRegular, "endpoint", endpoint)
}

// Page writes the metrics in Prometheus' text format, families in name order, each series in
// the order of its labels' values.
func (m *Metrics) Page() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	byName := map[string][]*series{}
	for _, s := range m.series {
		byName[s.name] = append(byName[s.name], s)
	}
	var b []byte
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		ss := byName[name]
		slices.SortFunc(ss, func(x, y *series) int { return strings.Compare(labelText(x.labels, ""), labelText(y.labels, "")) })
		f := routerFamilies[name]
		b = append(b, "# HELP "+name+" "+f.help+"\n# TYPE "+name+" "+f.typ+"\n"...)
		for _, s := range ss {
			if f.typ != "histogram" {
				b = append(b, name+labelText(s.labels, "")+" "+formatValue(s.value)+"\n"...)
				continue
			}
			var cum uint64
			for i, le := range durationBuckets {
				cum += s.counts[i]
				b = append(b, name+"_bucket"+labelText(s.labels, formatValue(le))+" "+strconv.FormatUint(cum, 10)+"\n"...)
			}
			b = append(b, name+"_bucket"+labelText(s.labels, "+Inf")+" "+strconv.FormatUint(s.count, 10)+"\n"...)
			b = append(b, name+"_sum"+labelText(s.labels, "")+" "+formatValue(s.sum)+"\n"...)
			b = append(b, name+"_count"+labelText(s.labels, "")+" "+strconv.FormatUint(s.count, 10)+"\n"...)
		}
		b = append(b, '\n')
	}
	return b
}

// labelText writes labels in braces, with le last when it is given.
func labelText(labels [][2]string, le string) string {
	if len(labels) == 0 && le == "" {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range labels {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l[0] + "=" + strconv.Quote(l[1]))
	}
	if le != "" {
		if len(labels) > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`le="` + le + `"`)
	}
	b.WriteByte('}')
	return b.String()
}

func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
