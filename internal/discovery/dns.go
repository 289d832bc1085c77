package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vllmstat/vllmstat/internal/target"
)

// Prefixes of target URLs resolved through DNS, as Thanos spells them.
const (
	prefixDNS    = "dns+"
	prefixDNSSRV = "dnssrv+"
)

// IsDNS reports that a target as written is to be resolved through DNS: it starts with dns+ or
// dnssrv+ (in any case).
func IsDNS(raw string) bool {
	l := strings.ToLower(strings.TrimSpace(raw))
	return strings.HasPrefix(l, prefixDNS) || strings.HasPrefix(l, prefixDNSSRV)
}

// DNSName is a target URL to resolve: every A and AAAA record of Host is a target at Port, or
// (SRV) every SRV record of Host is a target at the record's host and port; the targets have
// Scheme and Path, and scrape with Auth.
type DNSName struct {
	// URL is the name as written, normalised and without user info: the source's identity.
	URL    string
	SRV    bool
	Scheme string // http or https
	Host   string // the name to look up
	Port   string // A/AAAA only
	Path   string // path and query of every target
	Auth   target.Auth
}

// Source is the name of the collector source that holds the targets of d.
func (d DNSName) Source() string { return "dns:" + d.URL }

// ParseDNS reads a dns+ or dnssrv+ target URL: dns+http(s)://NAME:PORT[/path] or
// dnssrv+http(s)://NAME[/path] (NAME such as _vllm._tcp.fleet.example). The path defaults to
// /metrics; user info becomes basic-auth credentials. Its errors never quote raw.
func ParseDNS(raw string) (DNSName, error) {
	raw = strings.TrimSpace(raw)
	var d DNSName
	plus := strings.Index(raw, "+")
	if plus < 0 || !IsDNS(raw) {
		return d, fmt.Errorf("want dns+http://NAME:PORT/metrics or dnssrv+http://_SERVICE._tcp.NAME/metrics")
	}
	kind := strings.ToLower(raw[:plus+1])
	d.SRV = kind == prefixDNSSRV
	u, err := url.Parse(raw[plus+1:])
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the URL, user info included
		}
		return d, fmt.Errorf("not a URL after %s: %v", kind, err)
	}
	d.Scheme = strings.ToLower(u.Scheme)
	if d.Scheme != "http" && d.Scheme != "https" {
		return d, fmt.Errorf("scheme %q after %s: only http and https", u.Scheme, kind)
	}
	d.Host, d.Port = u.Hostname(), u.Port()
	switch {
	case d.Host == "":
		return d, fmt.Errorf("no name to look up")
	case d.SRV && d.Port != "":
		return d, fmt.Errorf("a dnssrv+ URL has no port: the SRV records give it")
	case !d.SRV && d.Port == "":
		return d, fmt.Errorf("a dns+ URL needs a port, e.g. dns+http://NAME:8000/metrics")
	case !d.SRV:
		if p, err := strconv.Atoi(d.Port); err != nil || p < 1 || p > 65535 {
			return d, fmt.Errorf("port %q: must be 1 to 65535", d.Port)
		}
	}
	if u.Path == "" {
		u.Path = "/metrics"
	}
	if u.User != nil {
		pw, _ := u.User.Password()
		d.Auth.Basic = &target.BasicAuth{Username: target.NewSecret(u.User.Username()), Password: target.NewSecret(pw)}
		u.User = nil
	}
	u.Scheme = d.Scheme
	d.Path = u.EscapedPath()
	if u.RawQuery != "" {
		d.Path += "?" + u.RawQuery
	}
	d.URL = kind + u.String()
	return d, nil
}

// Resolver is the part of *net.Resolver that discovery uses.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

// NewResolver returns a resolver that asks the DNS server at server (host:port) instead of the
// system's, or the system's resolver when server is "".
func NewResolver(server string) Resolver {
	if server == "" {
		return net.DefaultResolver
	}
	return serverResolver{server: server, r: &net.Resolver{
		PreferGo: true, // the only resolver that honours Dial
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, server)
		},
	}}
}

// serverResolver asks one DNS server, and says so in its errors (net.Resolver names the
// system's server it would have asked).
type serverResolver struct {
	server string
	r      *net.Resolver
}

func (s serverResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	ips, err := s.r.LookupIPAddr(ctx, host)
	return ips, s.fix(err)
}

func (s serverResolver) LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error) {
	cname, srvs, err := s.r.LookupSRV(ctx, service, proto, name)
	return cname, srvs, s.fix(err)
}

func (s serverResolver) fix(err error) error {
	var de *net.DNSError
	if errors.As(err, &de) && de.Server != "" {
		de.Server = s.server
	}
	return err
}

// dnsSource is one DNS name and what it last resolved to. Only its loop goroutine uses it.
type dnsSource struct {
	name    DNSName
	res     Resolver
	timeout time.Duration
	log     *slog.Logger
	last    []target.Target // the targets handed over (see stable)
	prev    []target.Target // the last answer
	known   bool            // last holds an answer (the first lookup succeeded)
	failing bool            // the last lookup failed (logged once per episode)
}

// refresh looks the name up and returns an update when its targets changed. A failed lookup
// keeps the last targets; a name that does not exist, or has no records, has no targets. A
// target goes once two lookups in a row lack it (see stable).
func (s *dnsSource) refresh(ctx context.Context) []update {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ts, err := s.lookup(ctx)
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
			return nil // the run is ending
		}
		if !s.failing {
			s.failing = true
			s.log.Warn("dns discovery failed; keeping the targets found last", "source", s.name.URL, "targets", len(s.last), "err", err)
		}
		return nil
	}
	if s.failing {
		s.failing = false
		s.log.Info("dns discovery recovered", "source", s.name.URL, "targets", len(ts))
	}
	ts, s.prev = stable(ts, s.prev, s.last), ts
	slices.SortFunc(ts, func(a, b target.Target) int { return strings.Compare(a.URL, b.URL) })
	if s.known && sameTargets(ts, s.last) {
		return nil
	}
	s.last, s.known = ts, true
	return []update{{source: s.name.Source(), targets: ts}}
}

// lookup resolves the name into targets, sorted by URL, each once.
func (s *dnsSource) lookup(ctx context.Context) ([]target.Target, error) {
	var hostports []string
	if s.name.SRV {
		_, srvs, err := s.res.LookupSRV(ctx, "", "", s.name.Host)
		if err != nil && !notFound(err) {
			return nil, fmt.Errorf("look up SRV records of %q: %w", s.name.Host, err)
		}
		for _, r := range srvs {
			host := strings.TrimSuffix(r.Target, ".")
			if host == "" { // "." : the service is decidedly not available here (RFC 2782)
				continue
			}
			hostports = append(hostports, net.JoinHostPort(host, strconv.Itoa(int(r.Port))))
		}
	} else {
		ips, err := s.res.LookupIPAddr(ctx, s.name.Host)
		if err != nil && !notFound(err) {
			return nil, fmt.Errorf("look up A/AAAA records of %q: %w", s.name.Host, err)
		}
		for _, ip := range ips {
			host := ip.IP.String()
			if ip.Zone != "" { // a link-local address: the zone goes in the URL escaped (RFC 6874)
				host += "%25" + url.PathEscape(ip.Zone)
			}
			hostports = append(hostports, net.JoinHostPort(host, s.name.Port))
		}
	}
	var ts []target.Target
	for _, hp := range hostports {
		t, err := target.Parse(s.name.Scheme + "://" + hp + s.name.Path)
		if err != nil {
			return nil, fmt.Errorf("record %q of %q gives no target URL: %w", hp, s.name.Host, err)
		}
		t.Auth = s.name.Auth
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b target.Target) int { return strings.Compare(a.URL, b.URL) })
	ts = slices.CompactFunc(ts, func(a, b target.Target) bool { return a.URL == b.URL })
	return ts, nil
}

// notFound reports an answer saying that the name has no such records: a name scaled to zero,
// not a failure.
func notFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}
