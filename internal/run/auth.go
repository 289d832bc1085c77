package run

import (
	"log/slog"

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
