package sim

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// TestVersionTag: with a version tag the servers answer their weight version as vLLM and
// SGLang keep it, a string: "default" before the first load (vLLM's /weight_info too, where it
// answers null without a tag), then the tag and the number; the control calls take the tagged
// string; and a tag that ends in a digit or is not printable is refused.
func TestVersionTag(t *testing.T) {
	for _, engine := range []string{fleetconfig.EngineVLLM, fleetconfig.EngineSGLang} {
		t.Run(engine, func(t *testing.T) {
			cfg := simtest.FastConfig()
			cfg.Engine = engine
			cfg.Workload.Kind = workload.WorkloadNone
			cfg.Workload.LoadTime = time.Second
			cfg.VersionTag = "step-"
			f := startFleet(t, cfg)
			base := strings.TrimSuffix(f.URLs()[0], "/metrics")
			path := "/weight_info"
			if engine == fleetconfig.EngineSGLang {
				path = "/model_info"
			}
			version := func() string {
				t.Helper()
				var info struct {
					WeightVersion *string `json:"weight_version"`
				}
				if err := json.Unmarshal([]byte(simtest.MustGet(t, base+path)), &info); err != nil || info.WeightVersion == nil {
					t.Fatalf("%s: %v", path, err)
				}
				return *info.WeightVersion
			}
			if v := version(); v != "default" {
				t.Errorf("before any load: %q, want default", v)
			}
			if code, body := simtest.Post(t, base+"/update_weight_version", `{"new_version": "step-4"}`); code != 200 {
				t.Fatalf("update_weight_version: %d %s", code, body)
			}
			if v := version(); v != "step-4" {
				t.Errorf("after update_weight_version step-4: %q", v)
			}
			if code, _ := simtest.Post(t, base+"/update_weight_version", `{"new_version": "ckpt-4"}`); code != 400 {
				t.Errorf("update_weight_version ckpt-4: %d, want 400", code)
			}
		})
	}
	for _, tag := range []string{"step-1", "a\x1bb", strings.Repeat("x", 65)} {
		cfg := simtest.FastConfig()
		cfg.VersionTag = tag
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "version tag") {
			t.Errorf("tag %q: %v, want refused", tag, err)
		}
	}
}
