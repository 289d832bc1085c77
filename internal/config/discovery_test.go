package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDiscoveryFile(t *testing.T) {
	c, err := Load("testdata/discovery.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(c.Targets) != 1 || c.Targets[0].URL != "http://10.0.0.1:8000/metrics" {
		t.Errorf("static targets %v, want the one without a DNS prefix", c.Targets)
	}
	if len(c.DNS) != 2 || c.DNS[0].URL != "dns+http://engines.vllm.svc:8000/metrics" || c.DNS[0].SRV || !c.DNS[1].SRV {
		t.Fatalf("dns %+v", c.DNS)
	}
	if a := c.DNS[0].Auth.Authorization; a == nil || a.Credentials.Reveal() != "fleet-token" {
		t.Errorf("dns+ name without credentials got %v, want the top-level ones", c.DNS[0].Auth)
	}
	if a := c.DNS[1].Auth.Authorization; a == nil || a.Credentials.Reveal() != "own-token" {
		t.Errorf("dnssrv+ name with its own credentials got %v", c.DNS[1].Auth)
	}
	if want := []string{filepath.Join("testdata", "sd/*.json"), "/etc/vllmstat/fleet.yaml"}; strings.Join(c.FileSD, " ") != strings.Join(want, " ") {
		t.Errorf("file_sd %v, want %v (relative to the file)", c.FileSD, want)
	}
	if c.RefreshInterval != 10*time.Second || c.DNSServer != "10.96.0.10:53" || !c.HasDiscovery() {
		t.Errorf("refresh_interval %v dns_server %q", c.RefreshInterval, c.DNSServer)
	}
	if Default().RefreshInterval != 30*time.Second {
		t.Errorf("default refresh_interval %v, want 30s", Default().RefreshInterval)
	}
}

// TestBadDiscoveryFile: every problem of the discovery settings is reported, as run reports
// them, the parse's and Validate's together.
func TestBadDiscoveryFile(t *testing.T) {
	c, err := Load("testdata/discovery.bad.yaml")
	all := ""
	if err != nil {
		all = err.Error()
	}
	if err := c.Validate(); err != nil {
		all += "\n" + err.Error()
	}
	for _, want := range []string{
		`targets[0]: "dns+http://engines.vllm.svc/metrics" is not allowed: a dns+ URL needs a port`,
		`targets[1]: "dnssrv+http://_m._tcp.engines:80/metrics" is not allowed: a dnssrv+ URL has no port`,
		`targets[3]: "dns+http://a.svc:80/metrics" is targets[2] again`,
		`file_sd[0] (line 6): "sd/[.json" is not allowed: must be a file path or a glob`,
		`file_sd[1] (line 6): must be a file path or glob`,
		`refresh_interval: 1ms is not allowed: must be a duration from 100ms to 24h0m0s`,
		`dns_server: "dns.example:53" is not allowed: must be an IP address and port`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
}

// TestDiscoveryWithoutTargets: a run without static targets and without an API is fine when
// discovery may find targets, and an error otherwise.
func TestDiscoveryWithoutTargets(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		ok   bool
	}{
		{"listen: \"\"\n", false},
		{"listen: \"\"\nfile_sd: [sd/*.json]\n", true},
		{"listen: \"\"\ntargets: [\"dns+http://a.svc:80\"]\n", true},
	} {
		c, err := Parse([]byte(tt.yaml))
		if err == nil {
			err = c.Validate()
		}
		if (err == nil) != tt.ok {
			t.Errorf("%q: %v, want ok=%v", tt.yaml, err, tt.ok)
		}
	}
}
