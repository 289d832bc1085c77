package trtllmpage

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/expo"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// trtllmConfig is one TensorRT-LLM server with the fixtures' model and a KV cache small enough
// that a batch preempts requests, running one GRPO batch.
func trtllmConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.Engine = fleetconfig.EngineTRTLLM
	cfg.Servers, cfg.DP = 1, 1
	cfg.Model = "Qwen/Qwen3-1.7B"
	cfg.BlocksPerEngine = 640
	cfg.Workload.Batches = 1
	return cfg
}

// mustSim builds the model of cfg with this package's page writer.
func mustSim(t testing.TB, cfg fleetconfig.Config) *fleetmodel.Sim {
	t.Helper()
	s := simtest.Build(t, fleetmodel.New, cfg)
	s.SetPages(NewTRTLLMPageWriter(cfg))
	return s
}

// pageAt is server 0's page once the model reached at.
func pageAt(s *fleetmodel.Sim, at time.Duration) string {
	s.AdvanceTo(at)
	return string(s.Page(0, simtest.Start))
}

// samplesOf reads every sample of page with the project's exposition parser, keyed by name and
// the values of the labels in keep, in that order: `name{v1,v2}`, or `name` without any; the
// buckets only when le is kept.
func samplesOf(t testing.TB, page string, keep ...string) map[string]float64 {
	t.Helper()
	var names []string
	for _, l := range strings.Split(page, "\n") {
		if i := strings.IndexAny(l, "{ "); l != "" && l[0] != '#' && i > 0 && !slices.Contains(names, l[:i]) {
			names = append(names, l[:i])
		}
	}
	m := map[string]float64{}
	buckets := slices.Contains(keep, "le")
	err := expo.Parse([]byte(page), expo.NewNames(names), func(s *expo.Sample) {
		if !buckets && strings.HasSuffix(s.Name, "_bucket") {
			return
		}
		var vals []string
		for _, k := range keep {
			for _, l := range s.Labels {
				if l.Name == k {
					vals = append(vals, l.Value)
				}
			}
		}
		key := s.Name
		if len(vals) > 0 {
			key += "{" + strings.Join(vals, ",") + "}"
		}
		if _, dup := m[key]; dup {
			t.Errorf("two samples %s", key)
		}
		m[key] = s.Value
	})
	if err != nil {
		t.Fatalf("page does not parse: %v", err)
	}
	return m
}
