package fleetconfig

import (
	"strings"
	"testing"
)

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"servers", func(c *Config) { c.Servers = 0 }, "servers must be at least 1"},
		{"version", func(c *Config) { c.Version = "0.9" }, `vllm version "0.9" is not supported`},
		{"dp with 0.8", func(c *Config) { c.Version = "0.8"; c.DP = 2 }, "use dp 1"},
		{"speed", func(c *Config) { c.Speed = 0 }, "speed must be a positive number"},
		{"small cache", func(c *Config) { c.BlocksPerEngine = 10 }, "cannot hold one request"},
		{"workload", func(c *Config) { c.Workload.Kind = "burst" }, `workload kind "burst"`},
		{"long requests", func(c *Config) { c.Workload.MaxTokens = 4000 }, "exceed max model len"},
		{"router policy", func(c *Config) { c.Engine, c.Router, c.RouterPolicy = EngineSGLang, true, "random" }, `router-policy "random" is not simulated: use round_robin or cache_aware`},
		{"fault server", func(c *Config) { c.Faults = []Fault{{Kind: FaultRestart, Server: 5}} }, "aims at server 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	cfg := DefaultConfig()
	cfg.Servers, cfg.Speed = 0, -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "servers") || !strings.Contains(err.Error(), "speed") {
		t.Fatalf("want both problems reported at once, got %v", err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
}
