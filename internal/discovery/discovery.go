// Package discovery finds targets as Thanos and Prometheus users know it: DNS names
// (dns+http://NAME:PORT/metrics for every A/AAAA record, dnssrv+http://_SERVICE._tcp.NAME/metrics
// for every SRV record) and files in Prometheus' file_sd format. Each DNS name and each file is
// one source of targets; a Manager re-checks them periodically, on its own goroutines, and hands
// every source's targets to the collector, which scrapes their union. A source that fails (a
// lookup error, a broken file) keeps its last good targets.
package discovery

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/target"
)

// Setter receives the targets a source found; the collector is one. SetSourceTargets may block
// while the collector is busy, never on DNS or files: lookups happen before it is called.
type Setter interface {
	SetSourceTargets(ctx context.Context, source string, ts []target.Target) error
}

// DefaultRefresh is how often sources are re-checked by default (refresh_interval).
const DefaultRefresh = 30 * time.Second

// maxFileRefresh bounds how long a changed file_sd file waits to be read: files are cheap to
// re-read, DNS servers are someone else's.
const maxFileRefresh = 5 * time.Second

// Options configure a Manager.
type Options struct {
	DNS   []DNSName // DNS names to resolve
	Files []string  // file_sd paths or globs
	// Refresh is how often DNS names are resolved again (default DefaultRefresh); files are
	// re-read every Refresh or every 5 s, whichever is shorter.
	Refresh time.Duration
	// Resolver answers DNS lookups; nil: the system's (see NewResolver for another server).
	Resolver Resolver
	Clock    clock.Clock
	Logger   *slog.Logger
}

// Manager runs the discovery sources. Create it with New and run it with Run.
type Manager struct {
	opt   Options
	set   Setter
	dns   []*dnsSource
	files *fileSet
}

// New returns a Manager that hands what it finds to set; nothing starts before Run.
func New(opt Options, set Setter) *Manager {
	if opt.Refresh <= 0 {
		opt.Refresh = DefaultRefresh
	}
	if opt.Resolver == nil {
		opt.Resolver = NewResolver("")
	}
	if opt.Clock == nil {
		opt.Clock = clock.Real{}
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opt: opt, set: set}
	for _, d := range opt.DNS {
		m.dns = append(m.dns, &dnsSource{name: d, res: opt.Resolver, timeout: lookupTimeout, log: opt.Logger})
	}
	if len(opt.Files) > 0 {
		m.files = newFileSet(opt.Files, opt.Logger)
		m.files.clock = opt.Clock
	}
	return m
}

// lookupTimeout bounds one lookup. A source's lookups never overlap (a slow one delays the
// next), so it need not be shorter than the refresh interval.
const lookupTimeout = 10 * time.Second

// Run checks every source at once, then again every refresh interval, until ctx ends. Each
// DNS name has its own goroutine, so that a slow name never holds another back; the files share
// one. Run returns when all of them have.
func (m *Manager) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, d := range m.dns {
		wg.Go(func() { m.loop(ctx, m.opt.Refresh, d.refresh) })
	}
	if m.files != nil {
		wg.Go(func() { m.loop(ctx, min(m.opt.Refresh, maxFileRefresh), m.files.refresh) })
	}
	wg.Wait()
	return nil
}

// update is a source's new targets, to hand to the Setter.
type update struct {
	source  string
	targets []target.Target
}

// loop calls refresh at once and then every d, handing its updates to the Setter in order. It
// returns when ctx ends, even from a refresh stuck in the file system (a glob of a directory
// on a mount that stopped answering): that refresh goes on alone until the kernel lets it go,
// and its updates are dropped.
func (m *Manager) loop(ctx context.Context, d time.Duration, refresh func(context.Context) []update) {
	t := m.opt.Clock.NewTicker(d)
	defer t.Stop()
	for {
		refreshed := make(chan []update, 1)
		go func() { refreshed <- refresh(ctx) }()
		var ups []update
		select {
		case ups = <-refreshed:
		case <-ctx.Done():
			return
		}
		for _, u := range ups {
			if err := m.set.SetSourceTargets(ctx, u.source, u.targets); err != nil {
				return // the run is over
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// stable returns the targets a source hands over when it answered cur, after prev, and has
// applied: those of cur, then those of applied that prev listed too. So a target goes only
// once two answers in a row lack it: a file read while it is rewritten in place (half
// written, it may parse as a shorter list), a DNS answer that lacks a name for a moment,
// remove nothing. The collector keeps a removed target's workers for a grace period too, so
// that one that comes back soon after goes on counting.
func stable(cur, prev, applied []target.Target) []target.Target {
	in := func(ts []target.Target) map[string]bool {
		m := make(map[string]bool, len(ts))
		for _, t := range ts {
			m[t.URL] = true
		}
		return m
	}
	now, before := in(cur), in(prev)
	out := cur
	for _, t := range applied {
		if !now[t.URL] && before[t.URL] {
			if len(out) == len(cur) {
				out = slices.Clone(cur)
			}
			out = append(out, t)
		}
	}
	return out
}

// sameTargets reports that a and b list the same targets, with the same labels, in order.
// Credentials come from the configuration and never change while a source runs.
func sameTargets(a, b []target.Target) bool {
	return slices.EqualFunc(a, b, func(x, y target.Target) bool { return x.URL == y.URL && maps.Equal(x.Labels, y.Labels) })
}
