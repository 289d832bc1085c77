package sim

import (
	"testing"
	"time"
)

// With a KV connector, engines load part of their local misses from the shared external
// cache: the pages count the lookups and hits, the prompt tokens by source still add up to the
// prompt tokens, and the work done is the same as without it.
func TestKVConnector(t *testing.T) {
	run := func(on bool) map[string]float64 {
		cfg := DefaultConfig()
		cfg.DP = 2
		cfg.BlocksPerEngine = 640 // small enough to evict, so that misses happen after the first batch
		cfg.KVConnector = on
		cfg.Workload.Batches = 3
		s := mustSim(t, cfg)
		s.AdvanceTo(60 * time.Second)
		return simTotalsFromPages(t, s)
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

func TestExternalCacheEvictsOldest(t *testing.T) {
	c := newExternalCache(2)
	c.save(1)
	c.save(2)
	c.save(1) // already there: not saved again, still the oldest
	c.save(3)
	if c.has[1] || !c.has[2] || !c.has[3] {
		t.Errorf("after saving 1, 2, 1, 3 in a cache of 2: holds %v, want 2 and 3", c.has)
	}
	if n := c.lookup([]uint64{9, 2, 3, 1}, 1, 4); n != 2 {
		t.Errorf("lookup from 1 found %d in a row, want 2", n)
	}
}

// A dataset of two batches' questions comes back in the third batch, in the same order and on
// the same engines; without a dataset no question repeats.
func TestDatasetEpochs(t *testing.T) {
	for _, dataset := range []int{0, 64} {
		w := DefaultWorkload()
		w.Prompts, w.Dataset = 32, dataset
		g := newGenerator(w, 4, 4096, 1)
		b1, b2, b3 := g.batch(1, 0), g.batch(2, 0), g.batch(3, 0)
		seen := map[uint64]bool{}
		for _, rs := range append(b1, b2...) {
			seen[rs.spec.QuestionSeed] = true
		}
		repeats := 0
		for i, rs := range b3 {
			if seen[rs.spec.QuestionSeed] {
				repeats++
				if rs.spec.QuestionSeed != b1[i].spec.QuestionSeed || rs.engine != b1[i].engine {
					t.Errorf("dataset %d: request %d of batch 3 repeats another question or engine than batch 1's", dataset, i)
				}
			}
		}
		if want := map[int]int{0: 0, 64: len(b3)}[dataset]; repeats != want {
			t.Errorf("dataset %d: %d of batch 3's %d requests repeat a question, want %d", dataset, repeats, len(b3), want)
		}
	}
}
