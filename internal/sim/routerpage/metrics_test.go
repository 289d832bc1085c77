package routerpage

import (
	"strings"
	"testing"
	"time"
)

// The router's own page: a family per recorded name, in name order, with the gateway's HELP
// text and type; counters as integers; a duration histogram over the router's twenty buckets,
// cumulative, then its sum and count; the labels in the order the gateway records them.
func TestMetricsPage(t *testing.T) {
	m := NewMetrics()
	m.RouterRequest("m", "generate", false)
	m.RouterRequest("m", "generate", false)
	m.RouterRequest("m", "chat", true)
	m.RouterDuration("m", "generate", 30*time.Millisecond)
	m.RouterDuration("m", "generate", 2*time.Second)
	m.WorkerOutcome("http://b:1", false)
	m.WorkerOutcome("http://a:1", true)
	page := string(m.Page())
	for _, want := range []string{
		"# HELP smg_router_request_duration_seconds Router request duration by router_type, backend_type, connection_mode, model, endpoint\n" +
			"# TYPE smg_router_request_duration_seconds histogram\n",
		`smg_router_request_duration_seconds_bucket{router_type="http",backend_type="regular",connection_mode="http",model="m",endpoint="generate",le="0.025"} 0` + "\n" +
			`smg_router_request_duration_seconds_bucket{router_type="http",backend_type="regular",connection_mode="http",model="m",endpoint="generate",le="0.05"} 1` + "\n",
		`smg_router_request_duration_seconds_bucket{router_type="http",backend_type="regular",connection_mode="http",model="m",endpoint="generate",le="2.5"} 2` + "\n",
		`smg_router_request_duration_seconds_bucket{router_type="http",backend_type="regular",connection_mode="http",model="m",endpoint="generate",le="+Inf"} 2` + "\n" +
			`smg_router_request_duration_seconds_sum{router_type="http",backend_type="regular",connection_mode="http",model="m",endpoint="generate"} 2.03` + "\n" +
			`smg_router_request_duration_seconds_count{router_type="http",backend_type="regular",connection_mode="http",model="m",endpoint="generate"} 2` + "\n\n",
		"# TYPE smg_router_requests_total counter\n" +
			`smg_router_requests_total{router_type="http",backend_type="regular",connection_mode="http",model="m",endpoint="chat",streaming="true"} 1` + "\n" +
			`smg_router_requests_total{router_type="http",backend_type="regular",connection_mode="http",model="m",endpoint="generate",streaming="false"} 2` + "\n\n",
		"# TYPE smg_worker_cb_outcomes_total counter\n" +
			`smg_worker_cb_outcomes_total{worker="http://a:1",outcome="success"} 1` + "\n" +
			`smg_worker_cb_outcomes_total{worker="http://b:1",outcome="failure"} 1` + "\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks\n%s\n---- page:\n%s", want, page)
		}
	}
	if i, j, k := strings.Index(page, "smg_router_request_duration"), strings.Index(page, "smg_router_requests_total"), strings.Index(page, "smg_worker_cb"); !(i < j && j < k) || strings.Count(page, "# TYPE") != 3 {
		t.Errorf("want three families in name order:\n%s", page)
	}
	if strings.Count(page, "_bucket{") != 21 {
		t.Errorf("want 20 buckets and +Inf:\n%s", page)
	}
}
