package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/vllmstat/vllmstat/internal/discovery"
	"github.com/vllmstat/vllmstat/internal/target"
)

// Bounds of refresh_interval: below the lower one a run would mostly ask DNS servers.
const (
	minRefresh = 100 * time.Millisecond
	maxRefresh = 24 * time.Hour
)

// HasDiscovery reports that targets come from DNS names or file_sd files.
func (c *Config) HasDiscovery() bool { return len(c.DNS) > 0 || len(c.FileSD) > 0 }

// validateDiscovery checks the discovery settings.
func (c *Config) validateDiscovery() Problems {
	var ps Problems
	if c.RefreshInterval < minRefresh || c.RefreshInterval > maxRefresh {
		path, line := c.at("refresh_interval")
		ps = append(ps, fmt.Sprintf("%s: %v is not allowed: must be a duration from %v to %v, e.g. 30s%s",
			path, c.RefreshInterval, minRefresh, maxRefresh, line))
	}
	if c.DNSServer != "" {
		host, port, err := net.SplitHostPort(c.DNSServer)
		_, aerr := netip.ParseAddr(host)
		p, perr := strconv.Atoi(port)
		if err != nil || aerr != nil || perr != nil || p < 1 || p > 65535 {
			path, line := c.at("dns_server")
			ps = append(ps, fmt.Sprintf("%s: %q is not allowed: must be an IP address and port such as 10.0.0.53:53 or [fd00::53]:53%s",
				path, c.DNSServer, line))
		}
	}
	return ps
}

// dnsTarget settles one dns+ or dnssrv+ entry of targets: its credentials (user info, its
// own, or the top-level ones), and that it is listed once.
func (c *Config) dnsTarget(at string, t target.Target, seen map[string]int, i int) string {
	d, err := discovery.ParseDNS(t.URL)
	if err != nil {
		return fmt.Sprintf("%s: %q is not allowed: %v", at, target.Redact(t.URL), err)
	}
	switch {
	case !d.Auth.IsZero() && !t.Auth.IsZero() && !d.Auth.Equal(t.Auth):
		return fmt.Sprintf("%s: %q has credentials both in its URL and in basic_auth or authorization; give them once", at, target.Redact(t.URL))
	case d.Auth.IsZero() && t.Auth.IsZero():
		d.Auth = c.Auth
	case d.Auth.IsZero():
		d.Auth = t.Auth
	}
	if j, dup := seen[d.URL]; dup {
		return fmt.Sprintf("%s: %q is %s[%d] again; a name is resolved once", at, target.Redact(t.URL), c.Path("targets"), j)
	}
	seen[d.URL] = i
	c.DNS = append(c.DNS, d)
	return ""
}
