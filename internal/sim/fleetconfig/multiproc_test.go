package fleetconfig

import (
	"strings"
	"testing"
)

func TestAPIServerCountValidation(t *testing.T) {
	for _, tt := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.APIServerCount = -1 }, "must not be negative"},
		{func(c *Config) { c.APIServerCount = 2; c.Version = "0.10" }, "wants vllm version 0.20"},
		{func(c *Config) { c.APIServerCount = 2; c.Engine = EngineSGLang }, "is vLLM's"},
		{func(c *Config) { c.APIServerCount = 2; c.Workload.Colocated = true }, "cannot run the colocated or async loop"},
	} {
		cfg := DefaultConfig()
		tt.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want an error saying %q", err, tt.want)
		}
	}
	for _, n := range []int{0, 1, 2, 8} {
		cfg := DefaultConfig()
		cfg.APIServerCount = n
		if err := cfg.Validate(); err != nil {
			t.Errorf("api server count %d: %v", n, err)
		}
	}
}
