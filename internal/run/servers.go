package run

import (
	"net"

	"github.com/vllmstat/vllmstat/internal/api"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/target"
)

// serverRules are the rules of the servers a router target's page names, asked for their weight
// versions: a router's page is the router's to write, not the operator's list, so a server it
// names is held to the rules of a target added through the API whose callers are not trusted.
// It may not be where the API refuses a target (allow_targets lets addresses through; the API
// listens on ln, nil for none), and it gets the credentials of the configured target at its URL,
// or the top-level ones where their hosts list its host, else none.
func serverRules(cfg config.Config, ln net.Listener) *scrape.ServerRules {
	var tp api.TargetPolicy
	if ln != nil {
		tp = targetPolicy(cfg, ln)
	} else {
		tp = api.TargetPolicy{Allow: cfg.AllowedTargets(), Local: interfaceAddrs}
		for _, t := range cfg.Targets {
			tp.Configured = append(tp.Configured, t.URL)
		}
	}
	own := make(map[string]target.Auth, len(cfg.Targets))
	for _, t := range cfg.Targets {
		own[t.URL] = t.Auth
	}
	top, hosts := cfg.Auth, cfg.AuthHosts
	return &scrape.ServerRules{
		Check: func(u string) error { return tp.Check(u + "/metrics") },
		Auth: func(u string) target.Auth {
			if a, ok := own[u]; ok {
				return a
			}
			if !top.IsZero() && !hosts.IsZero() && hosts.Match(u) {
				return top
			}
			return target.Auth{}
		},
	}
}
