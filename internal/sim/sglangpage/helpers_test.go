// Copies of test helpers whose originals are in the tests of the simulator's other packages:
// a test file cannot be imported.

package sglangpage

import (
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/expo"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
)

// pageFamily is one "# HELP"/"# TYPE" block of a page with its sample lines minus the values.
type pageFamily struct {
	name, typ, help string
	samples         []string
}

func parseStructure(t *testing.T, page string) []pageFamily {
	t.Helper()
	var fams []pageFamily
	for _, line := range strings.Split(strings.TrimSuffix(page, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(line[len("# HELP "):], " ")
			fams = append(fams, pageFamily{name: name, help: help})
		case strings.HasPrefix(line, "# TYPE "):
			name, typ, _ := strings.Cut(line[len("# TYPE "):], " ")
			if len(fams) == 0 || fams[len(fams)-1].name != name {
				t.Fatalf("TYPE line without HELP: %q", line)
			}
			fams[len(fams)-1].typ = typ
		default:
			if len(fams) == 0 {
				t.Fatalf("sample before any HELP: %q", line)
			}
			f := &fams[len(fams)-1]
			f.samples = append(f.samples, line[:strings.LastIndexByte(line, ' ')])
		}
	}
	return fams
}

var testStart = time.Unix(1795998522, 408573600)

func mustSim(t testing.TB, cfg fleetconfig.Config) *fleetmodel.Sim {
	t.Helper()
	s, err := newSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// asyncConfig is two servers of two vLLM engines in the async loop: a publish every 10 s, loads
// of 2 s, one engine 3 s late; GRPO batches one after another.
func asyncConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.DP = 2
	cfg.Workload.Async = true
	cfg.Workload.StepTime = 10 * time.Second
	cfg.Workload.Lag = 3 * time.Second
	cfg.Workload.LoadTime = 2 * time.Second
	cfg.Workload.Pause = 0
	return cfg
}

// samplesOf reads the samples of syncFamilies on body with the project's exposition parser,
// keyed by name and the values of the labels in keep, in that order: `name{v1,v2}`.
func samplesOf(t *testing.T, body []byte, keep ...string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	err := expo.Parse(body, expo.NewNames(syncFamilies), func(s *expo.Sample) {
		var vals []string
		for _, k := range keep {
			for _, l := range s.Labels {
				if l.Name == k {
					vals = append(vals, l.Value)
				}
			}
		}
		key := s.Name + "{" + strings.Join(vals, ",") + "}"
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

// syncFamilies are the families of a fleet that syncs weights, read with internal/expo.
var syncFamilies = []string{
	"vllm:engine_sleep_resource_state", "vllm:engine_fully_awake", "vllm:engine_sleep_state",
	"vllm:rl_weight_update_total", "vllm:rl_weight_update_created", "vllm:rl_weight_gen", "vllm:rl_weight_update_active",
	"vllm:rl_weight_update_duration_seconds_count", "vllm:rl_weight_update_duration_seconds_sum",
	"sglang:num_paused_reqs", "sglang:weight_load_duration_seconds",
}
