package routerpage

import (
	"testing"
)

// The merged page is the router's (sgl-model-gateway, core/metrics_aggregator.rs over the
// openmetrics-parser crate's Prometheus parser and Display): every ':' of a server's page turned
// into '_' (names, HELP texts, label values), label names sorted with worker_addr among them
// and le last, a histogram's buckets then _sum then _count (an integer), numbers as Rust prints
// them, a blank line between families; a page the parser rejects is left out whole (here: not
// Prometheus text, and a family whose samples differ in label names).
func TestMergeEnginePages(t *testing.T) {
	a := MetricPack{"http://a:1", []byte(`# HELP s:e2e_seconds Latency: e2e.
# TYPE s:e2e_seconds histogram
s:e2e_seconds_sum{model="m:1"} 2.5
s:e2e_seconds_bucket{le="0.5",model="m:1"} 1.0
s:e2e_seconds_bucket{le="1.0",model="m:1"} 2.0
s:e2e_seconds_bucket{le="+Inf",model="m:1"} 3.0
s:e2e_seconds_count{model="m:1"} 3.0
# HELP s:tokens_total Tokens.
# TYPE s:tokens_total counter
s:tokens_total{model="m:1"} 1e+06
# HELP s:running Running.
# TYPE s:running gauge
s:running{model="m:1",zone="z"} 2.0
`)}
	b := MetricPack{"http://b:1", []byte(`# HELP s:running Running.
# TYPE s:running gauge
s:running{model="m:1",zone="z"} 0.25
# HELP s:tokens_total Tokens.
# TYPE s:tokens_total counter
s:tokens_total{model="m:1"} 7.0
`)}
	bad := MetricPack{"http://c:1", []byte("<html>502</html>")}
	mixed := MetricPack{"http://d:1", []byte("# HELP s:running Running.\n# TYPE s:running gauge\ns:running{model=\"m\"} 1.0\ns:running 2.0\n")}
	got, err := MergeEnginePages([]MetricPack{a, bad, mixed, b}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := `# HELP s_e2e_seconds Latency_ e2e.
# TYPE s_e2e_seconds histogram
s_e2e_seconds_bucket{model="m_1",worker_addr="http://a:1",le="0.5"} 1
s_e2e_seconds_bucket{model="m_1",worker_addr="http://a:1",le="1"} 2
s_e2e_seconds_bucket{model="m_1",worker_addr="http://a:1",le="+Inf"} 3
s_e2e_seconds_sum{model="m_1",worker_addr="http://a:1"} 2.5
s_e2e_seconds_count{model="m_1",worker_addr="http://a:1"} 3

# HELP s_running Running.
# TYPE s_running gauge
s_running{model="m_1",worker_addr="http://a:1",zone="z"} 2
s_running{model="m_1",worker_addr="http://b:1",zone="z"} 0.25

# HELP s_tokens_total Tokens.
# TYPE s_tokens_total counter
s_tokens_total{model="m_1",worker_addr="http://a:1"} 1000000
s_tokens_total{model="m_1",worker_addr="http://b:1"} 7
`
	if string(got) != want {
		t.Errorf("merged:\n%s\nwant:\n%s", got, want)
	}
}
