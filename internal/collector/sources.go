package collector

import (
	"context"
	"slices"

	"github.com/vllmstat/vllmstat/internal/target"
)

// StaticSource is the source of the targets given in the configuration and through the API;
// discovery (DNS, files) keeps a source of its own per name or file.
const StaticSource = "static"

// sources holds the targets of every source; the collector scrapes their union. A URL listed by
// several sources is one target, with the credentials and labels of the first source that lists
// it (sources in the order they first gave targets, the static one first).
type sources struct {
	order []string
	sets  map[string][]target.Target
}

func (so *sources) set(name string, ts []target.Target) {
	if so.sets == nil {
		so.sets = map[string][]target.Target{}
	}
	if _, ok := so.sets[name]; !ok {
		so.order = append(so.order, name)
	}
	so.sets[name] = slices.Clone(ts)
}

func (so *sources) get(name string) []target.Target { return so.sets[name] }

// union is every source's targets, each URL once.
func (so *sources) union() []target.Target {
	n := 0
	for _, ts := range so.sets {
		n += len(ts)
	}
	out := make([]target.Target, 0, n)
	seen := make(map[string]bool, n)
	for _, name := range so.order {
		for _, t := range so.sets[name] {
			if !seen[t.URL] {
				seen[t.URL] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// setSource replaces the targets of one source and applies the union (see setTargets); the
// channel is closed once the change is applied.
func (s *state) setSource(name string, ts []target.Target) <-chan struct{} {
	s.sources.set(name, ts)
	return s.setTargets(s.sources.union())
}

// changeTargets runs f, which starts a change of targets, on the collector's goroutine, and
// waits until the change is applied: a change of many targets is applied in batches, while the
// collector goes on with its other work.
func (c *Collector) changeTargets(ctx context.Context, f func(*state) <-chan struct{}) error {
	var applied <-chan struct{}
	if err := c.call(ctx, func(s *state) { applied = f(s) }); err != nil {
		return err
	}
	select {
	case <-applied:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrStopped
	}
}

// SetTargets replaces the static targets (distinct URLs without user info); targets found by
// discovery stay. Data of removed targets stays in the open step; added ones start as new
// workers, a target removed earlier too, unless it was removed within the grace period (two
// intervals). A target without credentials keeps the ones it has, or gets APIAuth's when it is
// new.
func (c *Collector) SetTargets(ctx context.Context, ts []target.Target) error {
	return c.changeTargets(ctx, func(s *state) <-chan struct{} { return s.setSource(StaticSource, s.withAuth(ts, c.opt.APIAuth)) })
}

// firstScrapeMax is the most targets one AddTargets call scrapes at once and waits for: an
// engine registers itself (one target), while a call of thousands is an operator's list, which
// the ticks scrape spread over the interval rather than all at once.
const firstScrapeMax = 64

// AddTargets adds targets to the static ones; a URL already there is kept as it is, so adding
// is idempotent and many workers may register themselves at once. When it names at most
// firstScrapeMax targets, it returns once the first scrape of each that had none yet was taken
// (its baseline, so that what the engine counts from then on is counted), or after
// FirstScrapeWait: a target that does not answer by then is scraped as usual later.
func (c *Collector) AddTargets(ctx context.Context, ts []target.Target) error {
	var fresh []string // the targets this call adds
	err := c.changeTargets(ctx, func(s *state) <-chan struct{} {
		ts := s.withAuth(ts, c.opt.APIAuth)
		cur := slices.Clone(s.sources.get(StaticSource))
		have := make(map[string]bool, len(cur)+len(ts))
		for _, t := range cur {
			have[t.URL] = true
		}
		for _, t := range ts {
			if _, ok := s.pool.Generation(t.URL); !ok {
				fresh = append(fresh, t.URL)
			}
			if !have[t.URL] {
				have[t.URL] = true
				cur = append(cur, t)
			}
		}
		return s.setSource(StaticSource, cur)
	})
	if err != nil || len(ts) > firstScrapeMax {
		return err
	}
	var waits []chan struct{}
	err = c.call(ctx, func(s *state) {
		var now []string
		for _, u := range fresh {
			if st := s.targets[u]; st != nil && st.Scrapes == 0 {
				now = append(now, u)
			}
		}
		s.pool.ScrapeNow(now)
		for _, t := range ts {
			if st := s.targets[t.URL]; st != nil && st.Scrapes == 0 {
				ch := make(chan struct{})
				s.firstWait[t.URL] = append(s.firstWait[t.URL], ch)
				waits = append(waits, ch)
			}
		}
	})
	if err != nil || len(waits) == 0 {
		return err
	}
	timer := c.opt.Clock.NewTimer(c.opt.FirstScrapeWait)
	defer timer.Stop()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-timer.C():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return nil
		}
	}
	return nil
}

// RemoveTargets removes the static targets with these URLs; other URLs are ignored, so
// removing is idempotent. A URL that discovery also finds stays a target.
func (c *Collector) RemoveTargets(ctx context.Context, urls []string) error {
	return c.changeTargets(ctx, func(s *state) <-chan struct{} {
		gone := make(map[string]bool, len(urls))
		for _, u := range urls {
			gone[u] = true
		}
		cur := slices.DeleteFunc(slices.Clone(s.sources.get(StaticSource)), func(t target.Target) bool { return gone[t.URL] })
		return s.setSource(StaticSource, cur)
	})
}

// SetSourceTargets replaces the targets that one discovery source found; a new one without
// credentials gets DefaultAuth.
func (c *Collector) SetSourceTargets(ctx context.Context, source string, ts []target.Target) error {
	return c.changeTargets(ctx, func(s *state) <-chan struct{} { return s.setSource(source, s.withAuth(ts, s.discoveredAuth)) })
}
