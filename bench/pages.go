// Package bench compares vllmstat's exposition parsing with the parsers of Prometheus,
// VictoriaMetrics and expfmt on the same pages, and holds the static fleet server used for load
// runs against those scrapers (cmd/fleet). It is a module of its own so that their dependencies
// stay out of vllmstat's go.mod.
package bench

import (
	_ "embed"
	"fmt"

	"github.com/vllmstat/vllmstat/internal/benchpage"
)

// Two pages that vLLM's prometheus_client renders, the largest of the vLLM captures: a 0.10
// engine (old and new spellings side by side) and a 0.20 engine.
var (
	//go:embed testdata/prometheus-client-render-vllm-0.10.prom
	vllm010 []byte
	//go:embed testdata/prometheus-client-render-vllm-0.20.prom
	vllm020 []byte
)

// RayBytes is the size of the generated Ray metrics-agent page: a node with many workers, of
// which two are vLLM replicas.
const RayBytes = 1 << 20

// PageNames lists the pages Page knows, in a fixed order.
func PageNames() []string {
	return []string{"vllm-0.10", "vllm-0.20", "ray-1MB"}
}

// Page returns a named page; each call returns a fresh copy the caller may keep or change.
func Page(name string) ([]byte, error) {
	switch name {
	case "vllm-0.10":
		return append([]byte(nil), vllm010...), nil
	case "vllm-0.20":
		return append([]byte(nil), vllm020...), nil
	case "ray-1MB":
		return benchpage.Ray(RayBytes), nil
	}
	return nil, fmt.Errorf("unknown page %q (known: %v)", name, PageNames())
}
