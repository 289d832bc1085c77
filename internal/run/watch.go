package run

import (
	"context"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/collector"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/step"
)

// WatchOptions are how a live view sees its collector. Every hook runs on the collector's
// goroutine and must not block.
type WatchOptions struct {
	// Clock paces the scrapes and stamps them; nil is the wall clock.
	Clock clock.Clock
	// Observer is told of every scrape, of every target skipped by a tick, and of the targets.
	Observer collector.Observer
	// OnInterval gets every worker's values at every successful scrape (see step.Options).
	OnInterval func(step.Interval)
	// OnSession gets the whole session at exit: the one step open since the start, as it is,
	// with no last scrape.
	OnSession func(*step.Record)
}

// NewWatch returns a live view of cfg's targets (watch): the collector alone, scraping as a run
// does, with no sinks, no recording, no API and no file written. No step ever ends: the view
// shows what its hooks are told, and the step open at exit is the session.
func NewWatch(cfg config.Config, opt WatchOptions) *Pipeline {
	copt := collectorOptions(cfg)
	copt.Tracker = step.Options{Prefix: cfg.MetricPrefix, Scalars: true, OnInterval: opt.OnInterval}
	copt.Observer = opt.Observer
	copt.Clock = opt.Clock
	copt.NoFinalStep = true
	copt.OnOpenStep = opt.OnSession
	// No Logger: the view says what it shows (a target down, with its reason, and back) itself.
	p := &Pipeline{cfg: cfg, c: collector.New(copt)}
	p.group.Add(background(func(ctx context.Context) error { return p.c.Run(ctx) }))
	return p
}
