package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config/yamlx"
	"github.com/vllmstat/vllmstat/internal/target"
)

// Hosts are where the top-level credentials may be sent for a target added through the API:
// the hosts key of the top-level basic_auth or authorization. A host name matches a URL that
// spells its host so (in any case; names are never resolved), an IP address or CIDR a URL whose
// host is an address in it. The zero Hosts lists none.
type Hosts struct {
	names    []string       // lower case, without a trailing dot
	prefixes []netip.Prefix // an address is a prefix of its full length
}

// IsZero reports that no hosts are listed.
func (h Hosts) IsZero() bool { return len(h.names) == 0 && len(h.prefixes) == 0 }

// Match reports that the host of rawURL is one of h.
func (h Hosts) Match(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		return slices.ContainsFunc(h.prefixes, func(p netip.Prefix) bool { return p.Contains(a) })
	}
	return slices.Contains(h.names, strings.TrimSuffix(strings.ToLower(host), "."))
}

// String lists the hosts, for messages; they are not secret.
func (h Hosts) String() string {
	var out []string
	for _, p := range h.prefixes {
		if p.IsSingleIP() {
			out = append(out, p.Addr().String())
		} else {
			out = append(out, p.String())
		}
	}
	return "[" + strings.Join(append(out, h.names...), ", ") + "]"
}

// hostsRule is what an entry of hosts may be.
const hostsRule = "must be a host name, an IP address or a CIDR such as 10.0.0.0/8"

// resolveHosts reads the hosts of the top-level credentials from where their keys were (w);
// a list or an entry of the wrong kind was reported by the decode. Every problem is reported
// with its path.
func resolveHosts(w yamlx.Where) (Hosts, yamlx.Errors) {
	var h Hosts
	var es yamlx.Errors
	for _, key := range []string{"basic_auth.hosts", "authorization.hosts"} {
		n := w[key]
		if n == nil || n.Kind != yaml.SequenceNode {
			continue
		}
		if len(n.Content) == 0 {
			es = append(es, w.Problem(key, "is empty: list the hosts or CIDRs the credentials may be sent to, or leave hosts out"))
			continue
		}
		seen := map[string]int{} // entry -> its line
		for i, e := range n.Content {
			if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
				continue
			}
			path := fmt.Sprintf("%s[%d]", key, i)
			name, p, err := parseHost(e.Value)
			if err != nil {
				es = append(es, w.NotAllowed(path, e.Value, err.Error()))
				continue
			}
			id := name
			if name == "" {
				id = p.String()
			}
			if line, dup := seen[id]; dup {
				es = append(es, w.Problem(path, fmt.Sprintf("%q is listed twice (first at line %d)", e.Value, line)))
				continue
			}
			seen[id] = e.Line
			if name != "" {
				h.names = append(h.names, name)
			} else {
				h.prefixes = append(h.prefixes, p)
			}
		}
	}
	return h, es
}

// parseHost reads an entry of hosts: a host name (returned in lower case, without a trailing
// dot), or an IP address or CIDR (returned as a prefix).
func parseHost(s string) (string, netip.Prefix, error) {
	switch {
	case s == "":
		return "", netip.Prefix{}, errors.New(hostsRule)
	case strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t\r\n"):
		return "", netip.Prefix{}, errors.New("a host has no spaces")
	case strings.Contains(s, "://"):
		return "", netip.Prefix{}, errors.New("a URL; give the host alone, without scheme, port or path, e.g. gpu-1.example.com")
	case strings.Contains(s, "*"):
		return "", netip.Prefix{}, errors.New("wildcards are not supported; list the host names, or give a CIDR such as 10.0.0.0/8")
	case strings.Contains(s, "/"):
		p, err := parseCIDR(s)
		return "", p, err
	}
	if a, err := netip.ParseAddr(s); err == nil {
		p, err := addrPrefix(a)
		return "", p, err
	}
	if strings.HasPrefix(s, "[") {
		return "", netip.Prefix{}, errors.New("give an IPv6 address without brackets or port, e.g. fd00::1")
	}
	if host, _, err := net.SplitHostPort(s); err == nil && host != "" {
		return "", netip.Prefix{}, fmt.Errorf("give the host without a port, e.g. %s", host)
	}
	name := strings.TrimSuffix(strings.ToLower(s), ".")
	if !isHostName(name) {
		return "", netip.Prefix{}, errors.New("not a host name, an IP address or a CIDR such as 10.0.0.0/8")
	}
	return name, netip.Prefix{}, nil
}

// parseCIDR reads a CIDR such as 10.0.0.0/8, with no bits set past its length.
func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return netip.Prefix{}, errors.New("not a CIDR such as 10.0.0.0/8 or fd00::/64")
	case p.Addr().Is4In6():
		return netip.Prefix{}, errors.New("an IPv4-mapped IPv6 prefix; give it as IPv4, e.g. 10.0.0.0/8")
	case p != p.Masked():
		return netip.Prefix{}, fmt.Errorf("bits are set past the prefix length; did you mean %s?", p.Masked())
	}
	return p, nil
}

// addrPrefix returns an address given alone as the prefix of its full length; one with a zone
// or IPv4-mapped is refused, as nothing would match it.
func addrPrefix(a netip.Addr) (netip.Prefix, error) {
	switch {
	case a.Zone() != "":
		return netip.Prefix{}, fmt.Errorf("an IPv6 zone (%%%s) is not allowed; give the address alone", a.Zone())
	case a.Is4In6():
		return netip.Prefix{}, fmt.Errorf("an IPv4-mapped IPv6 address; give it as IPv4: %s", a.Unmap())
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// isHostName reports that s (lower case, no trailing dot) is a DNS host name: labels of
// letters, digits and hyphens, neither starting nor ending with a hyphen, the last one not all
// digits (which would be a malformed address, such as 10.0.0.256).
func isHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return strings.Trim(labels[len(labels)-1], "0123456789") != ""
}

// APIAuth returns what a target added through the API without credentials of its own, and not
// a target already (one keeps its own), is scraped with: the credentials of the config's target
// with its URL; else the top-level ones when AuthHosts lists its host, or, without AuthHosts,
// when the API requires a token (its callers are trusted); else none, for anyone who may call
// the API could otherwise list a server of their own and be sent them. withheld reports
// top-level credentials kept from the target. Call it after Validate.
func (c *Config) APIAuth() func(url string) (a target.Auth, withheld bool) {
	own := make(map[string]target.Auth, len(c.Targets))
	for _, t := range c.Targets {
		own[t.URL] = t.Auth
	}
	top, hosts, trusted := c.Auth, c.AuthHosts, c.APIToken.Reveal() != ""
	return func(url string) (target.Auth, bool) {
		if a, ok := own[url]; ok {
			return a, false
		}
		if top.IsZero() {
			return top, false
		}
		if hosts.IsZero() && trusted || hosts.Match(url) {
			return top, false
		}
		return target.Auth{}, true
	}
}
