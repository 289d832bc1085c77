package api

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// TargetPolicy is what PUT and POST /v1/targets refuse to add. Whoever may call the API names the
// servers vllmstat fetches, and sees what they answered in its errors: a cloud metadata service
// (credentials of the machine's role), or vllmstat itself. Refused are targets whose host is
//
//   - a link-local address (169.254.0.0/16, fe80::/10), where metadata services answer;
//   - another metadata service's address (fd00:ec2::254, 100.100.100.200), or its name
//     (metadata.google.internal, metadata, instance-data, instance-data.*.internal), in any
//     case, with or without a trailing dot;
//   - the unspecified address (0.0.0.0, ::), which reaches this machine;
//   - the API's own address or a loopback one, or localhost, with the API's port (compared as
//     a number, so 09400 is 9400); an API that listens on the unspecified address answers on
//     every address of the machine, and each of them is its own;
//   - a number that reads as an IPv4 address written otherwise (0xa9fea9fe, 2852039166), which
//     some resolvers take for the address;
//
// unless Allow lists the address. Host names are checked by name, never resolved: a name may
// resolve to another address by the time of the scrape, so only the API's token stands between
// a caller and a name of their own that points anywhere.
type TargetPolicy struct {
	// Allow are the addresses a target may have although a rule above refuses it
	// (allow_targets).
	Allow []netip.Prefix
	// Configured are the URLs of the configuration's targets, which are the operator's: listed
	// again through PUT, they are kept, whatever their address.
	Configured []string
	// API is the address the API listens on; the zero AddrPort refuses no port.
	API netip.AddrPort
	// Local returns the machine's addresses, asked once per change of targets when API is the
	// unspecified address (0.0.0.0, ::), where the API answers on each of them: addresses come
	// and go with the machine's interfaces.
	Local func() []netip.Addr
}

// metadataNames are the names of cloud metadata services, without their trailing dot: GCE's,
// which also answers to the short name metadata through the instance's search domain, and
// EC2's instance-data (instance-data.ec2.internal, instance-data.REGION.compute.internal).
var metadataNames = []string{"metadata.google.internal", "metadata", "instance-data"}

// isMetadataName reports whether name (lower case, without a trailing dot) is a cloud
// metadata service's name: one of metadataNames, or EC2's name qualified by its internal
// domain.
func isMetadataName(name string) bool {
	return slices.Contains(metadataNames, name) ||
		strings.HasPrefix(name, "instance-data.") && strings.HasSuffix(name, ".internal")
}

// metadataAddrs are the addresses of cloud metadata services outside link-local ranges.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),   // AWS, over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
}

// checker returns the policy's check, which says why a target's URL (as target.Parse gives
// it) may not be added through the API, or returns nil.
func (p TargetPolicy) checker() func(rawURL string) error {
	configured := make(map[string]bool, len(p.Configured))
	for _, u := range p.Configured {
		configured[u] = true
	}
	var local []netip.Addr
	if p.API.Addr().IsUnspecified() && p.Local != nil {
		for _, a := range p.Local() {
			local = append(local, a.WithZone("").Unmap())
		}
	}
	return func(rawURL string) error {
		if configured[rawURL] {
			return nil
		}
		return p.check(rawURL, local)
	}
}

// check is the policy's check of a URL that is not a configured target's; local are the
// machine's addresses where the API also answers.
func (p *TargetPolicy) check(rawURL string, local []netip.Addr) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil // target.Parse read it; nothing here reads it otherwise
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	// The port as a number: the dialer reads 09400 as 9400, so the text would let the API's
	// own port through written with a leading zero.
	n, err := strconv.ParseUint(port, 10, 16)
	own := p.API.IsValid() && err == nil && uint16(n) == p.API.Port()
	unless := "; a target added through the API may not be there unless allow_targets lists the address"
	host := u.Hostname()
	a, err := netip.ParseAddr(host)
	if err != nil {
		name := strings.TrimSuffix(strings.ToLower(host), ".")
		switch {
		case isMetadataName(name):
			return fmt.Errorf("%s is a cloud metadata service's name; a target added through the API may not be there (allow_targets lists addresses, not names)", name)
		case name == "localhost" && own:
			return fmt.Errorf("localhost:%d is vllmstat's own API%s", p.API.Port(), unless)
		case numericIPv4(name):
			return fmt.Errorf("%s reads as an IPv4 address written otherwise; write it as four decimal numbers such as 10.0.0.1", host)
		}
		return nil
	}
	a = a.WithZone("").Unmap()
	if slices.ContainsFunc(p.Allow, func(pr netip.Prefix) bool { return pr.Contains(a) }) {
		return nil
	}
	switch {
	case a.IsLinkLocalUnicast():
		return fmt.Errorf("%s is a link-local address, where cloud metadata services answer%s", a, unless)
	case slices.Contains(metadataAddrs, a):
		return fmt.Errorf("%s is a cloud metadata service's address%s", a, unless)
	case a.IsUnspecified():
		return fmt.Errorf("%s is the unspecified address, which reaches this machine%s", a, unless)
	case own && (a.IsLoopback() || a == p.API.Addr().Unmap() || slices.Contains(local, a)):
		return fmt.Errorf("%s is vllmstat's own API%s", netip.AddrPortFrom(a, p.API.Port()), unless)
	}
	return nil
}

// numericIPv4 reports that name is what inet_aton reads as an IPv4 address although it is not
// four decimal numbers: one to four parts, each a decimal, octal (leading 0) or hexadecimal
// (0x) number.
func numericIPv4(name string) bool {
	parts := strings.Split(name, ".")
	if len(parts) > 4 {
		return false
	}
	for _, s := range parts {
		digits := "0123456789"
		if rest, ok := strings.CutPrefix(s, "0x"); ok {
			s, digits = rest, "0123456789abcdef"
		}
		if s == "" || strings.Trim(s, digits) != "" {
			return false
		}
	}
	return true
}
