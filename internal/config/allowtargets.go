package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config/yamlx"
)

// allowRule is what an entry of allow_targets may be.
const allowRule = "must be an IP address or a CIDR such as 169.254.0.0/16"

// parseAllowTarget reads an entry of allow_targets: an IP address (the prefix of its full
// length) or a CIDR. A host name is refused: the API checks a target's name by name and never
// resolves it, so a name here would allow nothing.
func parseAllowTarget(s string) (netip.Prefix, error) {
	switch {
	case s == "":
		return netip.Prefix{}, errors.New(allowRule)
	case strings.Contains(s, "/"):
		return parseCIDR(s)
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return addrPrefix(a)
	}
	if name, _, err := parseHost(s); err == nil && name != "" {
		return netip.Prefix{}, errors.New("a host name; allow_targets lists IP addresses and CIDRs such as 169.254.0.0/16 (names are checked by name, never resolved)")
	}
	return netip.Prefix{}, errors.New("not an IP address or a CIDR such as 169.254.0.0/16")
}

// checkAllowTargets checks the entries of a file's allow_targets (where w says they were), appends
// their problems to es, and returns the good ones. A list or an entry of the wrong kind was
// reported by the decode.
func checkAllowTargets(w yamlx.Where, es yamlx.Errors) ([]string, yamlx.Errors) {
	n := w["allow_targets"]
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil, es
	}
	var good []string
	seen := map[netip.Prefix]int{} // entry -> its line
	for i, e := range n.Content {
		if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
			continue
		}
		path := fmt.Sprintf("allow_targets[%d]", i)
		p, err := parseAllowTarget(e.Value)
		if err != nil {
			es = append(es, w.NotAllowed(path, e.Value, err.Error()))
			continue
		}
		if line, dup := seen[p]; dup {
			es = append(es, w.Problem(path, fmt.Sprintf("%q is listed twice (first at line %d)", e.Value, line)))
			continue
		}
		seen[p] = e.Line
		good = append(good, e.Value)
	}
	return good, es
}

// validateAllowTargets checks allow_targets however it was set; a file's were checked as it was
// read, with their lines.
func (c *Config) validateAllowTargets() Problems {
	var ps Problems
	for i, s := range c.AllowTargets {
		if _, err := parseAllowTarget(s); err != nil {
			ps = append(ps, fmt.Sprintf("%s[%d]: %q is not allowed: %v", c.Path("allow_targets"), i, s, err))
		}
	}
	return ps
}

// AllowedTargets returns allow_targets as prefixes, an address as the prefix of its full length.
// Call it after Validate, which reports the entries it skips.
func (c *Config) AllowedTargets() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range c.AllowTargets {
		if p, err := parseAllowTarget(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}
