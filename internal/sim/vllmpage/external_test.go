package vllmpage

import (
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// With a KV connector, engines load part of their local misses from the shared external
// cache: the pages count the lookups and hits, the prompt tokens by source still add up to the
// prompt tokens, and the work done is the same as without it.
func TestKVConnector(t *testing.T) {
	run := func(on bool) map[string]float64 {
		cfg := fleetconfig.DefaultConfig()
		cfg.DP = 2
		cfg.BlocksPerEngine = 640 // small enough to evict, so that misses happen after the first batch
		cfg.KVConnector = on
		cfg.Workload.Batches = 3
		s := mustSim(t, cfg)
		s.AdvanceTo(60 * time.Second)
		return simtest.TotalsFromPages(t, len(s.Servers), s.Page)
	}
	off, on := run(false), run(true)
	if off["external_prefix_cache_queries"] != 0 || off["external_prefix_cache_hits"] != 0 || off["prompt_tokens_by_source/external_kv_transfer"] != 0 {
		t.Errorf("without a connector: external queries %v, hits %v, transferred %v; want 0",
			off["external_prefix_cache_queries"], off["external_prefix_cache_hits"], off["prompt_tokens_by_source/external_kv_transfer"])
	}
	q, h := on["external_prefix_cache_queries"], on["external_prefix_cache_hits"]
	if h == 0 || q == 0 {
		t.Fatalf("external queries %v, hits %v: the connector served nothing", q, h)
	}
	// Every request asks the connector once with all its tokens; the connector serves only
	// what the local cache missed.
	if q != on["prefix_cache_queries"] {
		t.Errorf("external queries %v, local queries %v: want one per request, alike", q, on["prefix_cache_queries"])
	}
	if h > q-on["prefix_cache_hits"] {
		t.Errorf("external hits %v exceed the local misses %v", h, q-on["prefix_cache_hits"])
	}
	if got := on["prompt_tokens_by_source/external_kv_transfer"]; got != h {
		t.Errorf("prompt tokens transferred %v, external hits %v", got, h)
	}
	sum := on["prompt_tokens_by_source/local_compute"] + on["prompt_tokens_by_source/local_cache_hit"] + on["prompt_tokens_by_source/external_kv_transfer"]
	if sum != on["prompt_tokens"] {
		t.Errorf("prompt tokens by source add up to %v, prompt tokens %v", sum, on["prompt_tokens"])
	}
	if on["prompt_tokens_by_source/local_compute"] >= off["prompt_tokens_by_source/local_compute"] {
		t.Errorf("prompt tokens computed: %v with the connector, %v without; want fewer", on["prompt_tokens_by_source/local_compute"], off["prompt_tokens_by_source/local_compute"])
	}
	for _, key := range []string{"generation_tokens", "prompt_tokens", "request_success/stop", "request_success/length"} {
		if on[key] != off[key] {
			t.Errorf("%s: %v with the connector, %v without", key, on[key], off[key])
		}
	}
}
