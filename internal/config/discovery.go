package config

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/discovery"
	"github.com/vllmstat/vllmstat/internal/scrape"
)

// Bounds of refresh_interval: below the lower one a run would mostly ask DNS servers.
const (
	minRefresh = 100 * time.Millisecond
	maxRefresh = 24 * time.Hour
)

// HasDiscovery reports that targets come from DNS names or file_sd files.
func (c *Config) HasDiscovery() bool { return len(c.DNS) > 0 || len(c.FileSD) > 0 }

// fileSD reads file_sd: a list of paths or globs, relative to the config file's directory.
func (d *decoder) fileSD(v *yaml.Node, path string) {
	if v.Kind != yaml.SequenceNode {
		d.problem(v, path, "must be a list of file paths or globs, e.g. [targets/*.json]")
		return
	}
	out := []string{}
	for i, e := range v.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		if e.Kind != yaml.ScalarNode || e.Tag == "!!null" || e.Value == "" {
			d.problem(e, p, "must be a file path or glob")
			continue
		}
		f := e.Value
		if d.dir != "" && !filepath.IsAbs(f) {
			f = filepath.Join(d.dir, f)
		}
		if _, err := filepath.Match(f, ""); err != nil {
			d.bad(e, p, "must be a file path or a glob (*, ?, [...])")
			continue
		}
		out = append(out, f)
	}
	d.c.FileSD = out
}

// validateDiscovery checks the discovery settings.
func (c *Config) validateDiscovery() Problems {
	var ps Problems
	if c.RefreshInterval < minRefresh || c.RefreshInterval > maxRefresh {
		ps = append(ps, fmt.Sprintf("%s: %v is not allowed: must be a duration from %v to %v, e.g. 30s",
			c.Path("refresh_interval"), c.RefreshInterval, minRefresh, maxRefresh))
	}
	if c.DNSServer != "" {
		host, port, err := net.SplitHostPort(c.DNSServer)
		_, aerr := netip.ParseAddr(host)
		p, perr := strconv.Atoi(port)
		if err != nil || aerr != nil || perr != nil || p < 1 || p > 65535 {
			ps = append(ps, fmt.Sprintf("%s: %q is not allowed: must be an IP address and port such as 10.0.0.53:53 or [fd00::53]:53",
				c.Path("dns_server"), c.DNSServer))
		}
	}
	return ps
}

// dnsTarget settles one dns+ or dnssrv+ entry of targets: its credentials (user info, its
// own, or the top-level ones), and that it is listed once.
func (c *Config) dnsTarget(at string, t scrape.Target, seen map[string]int, i int) string {
	d, err := discovery.ParseDNS(t.URL)
	if err != nil {
		return fmt.Sprintf("%s: %q is not allowed: %v", at, scrape.Redact(t.URL), err)
	}
	switch {
	case !d.Auth.IsZero() && !t.Auth.IsZero() && !d.Auth.Equal(t.Auth):
		return fmt.Sprintf("%s: %q has credentials both in its URL and in basic_auth or authorization; give them once", at, scrape.Redact(t.URL))
	case d.Auth.IsZero() && t.Auth.IsZero():
		d.Auth = c.Auth
	case d.Auth.IsZero():
		d.Auth = t.Auth
	}
	if j, dup := seen[d.URL]; dup {
		return fmt.Sprintf("%s: %q is %s[%d] again; a name is resolved once", at, scrape.Redact(t.URL), c.Path("targets"), j)
	}
	seen[d.URL] = i
	c.DNS = append(c.DNS, d)
	return ""
}
