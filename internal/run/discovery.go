package run

import (
	"log/slog"

	"github.com/vllmstat/vllmstat/internal/collector"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/discovery"
)

// newDiscovery returns the discovery of cfg's DNS names and file_sd files, feeding c.
func newDiscovery(cfg config.Config, c *collector.Collector, log *slog.Logger) *discovery.Manager {
	log.Info("discovering targets", "dns", len(cfg.DNS), "file_sd", len(cfg.FileSD), "refresh_interval", cfg.RefreshInterval)
	return discovery.New(discovery.Options{DNS: cfg.DNS, Files: cfg.FileSD, Refresh: cfg.RefreshInterval,
		Resolver: discovery.NewResolver(cfg.DNSServer), Logger: log}, c)
}
