package run

import (
	"log/slog"
	"net"
	"net/netip"

	"github.com/vllmstat/vllmstat/internal/api"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/target"
)

// apiAuth is the collector's APIAuth: cfg's rule (config.Config.APIAuth), and a warning the first
// time it keeps the top-level credentials from a target added through the API, so that the
// target's refused scrapes have a reason in the log. Only the collector's goroutine calls it.
func apiAuth(cfg config.Config, log *slog.Logger) func(url string) target.Auth {
	rule, told := cfg.APIAuth(), false
	return func(url string) target.Auth {
		a, withheld := rule(url)
		if withheld && !told {
			told = true
			if cfg.AuthHosts.IsZero() {
				log.Warn("a target added through the API is scraped without the top-level credentials: the API has no api_token, so anyone who may call it could add a server of their own; set api_token, or list in their hosts where they may go (said once)",
					"target", url)
			} else {
				log.Warn("a target added through the API is scraped without the top-level credentials: its host is not in their hosts (said once)",
					"target", url, "hosts", cfg.AuthHosts.String())
			}
		}
		return a
	}
}

// targetPolicy is what the API refuses to add as a target: cfg's allow_targets let addresses
// through, its own targets are kept when listed again, and the API listens on ln.
func targetPolicy(cfg config.Config, ln net.Listener) api.TargetPolicy {
	tp := api.TargetPolicy{Allow: cfg.AllowedTargets()}
	for _, t := range cfg.Targets {
		tp.Configured = append(tp.Configured, t.URL)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		tp.API = netip.AddrPortFrom(a.AddrPort().Addr().Unmap(), a.AddrPort().Port())
	}
	tp.Local = interfaceAddrs
	return tp
}

// interfaceAddrs returns the addresses of the machine's network interfaces, or none when they
// cannot be read (the loopback and unspecified rules still hold then).
func interfaceAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out
}
