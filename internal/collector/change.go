package collector

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/target"
)

// applyBatch is how many targets a change of targets starts or stops at a time. A change of
// more is applied in batches, between which the collector goes on with its other work (scrape
// results, step ends, API calls, a shutdown): starting or stopping a target, with its
// self-metrics and labels, costs a few microseconds, so a batch holds the collector for
// milliseconds however large the change (50,000 targets are 50 batches).
const applyBatch = 500

// change is the part of a change of targets not applied yet. A newer change replaces it: it is
// worked out again from the pool, and whoever waits for the older one waits for the newer.
type change struct {
	add    []target.Target // to start, in order
	remove []string        // to stop
	done   []chan struct{} // closed once the change is applied
}

// forgetLater is a removed target whose workers the tracker forgets once its grace period is
// over, unless it comes back before (see removedGrace).
type forgetLater struct {
	url string
	at  time.Time // when it was removed
}

// removedGrace is how long a removed target's workers are kept: two scrape intervals. A target
// that comes back within it (a file_sd file rewritten in place, a DNS name that flapped, a
// worker that registered again) goes on with its workers, so that its first scrape back counts
// what it served while away, as after failed scrapes; an engine that restarted meanwhile is
// known by its counters or _created, as always. One that comes back later is a new worker,
// whose first scrape is a baseline.
func (s *state) removedGrace() time.Duration { return 2 * s.c.opt.Interval }

// ready is always ready to receive from: the collector's loop selects it while work is left.
var ready = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// moreC returns a channel that is ready when there is more to do: expired removals left to
// forget, or the next batch of a change once the targets the last one started are ready to
// scrape (see scrape.Pool.Started); nil when there is nothing.
func (s *state) moreC() <-chan struct{} {
	switch {
	case s.forgetMore:
		return ready
	case s.pending != nil:
		return s.pool.Started()
	}
	return nil
}

// setTargets makes ts the targets: it works out what to start and stop (in time proportional to
// the targets there are, wanted or not), applies the first batch, and leaves the rest to
// applyMore. Kept targets take the credentials given now (keeping theirs when given none) at
// once. It returns a channel closed once the whole change is applied.
func (s *state) setTargets(ts []target.Target) <-chan struct{} {
	ts = append([]target.Target(nil), ts...)
	for i := range ts {
		if ts[i].Auth.IsZero() {
			if _, ok := s.pool.Generation(ts[i].URL); ok {
				ts[i].Auth = s.pool.Auth(ts[i].URL)
			}
		}
	}
	want := make(map[string]bool, len(ts))
	have := 0
	for _, t := range ts {
		want[t.URL] = true
		if _, ok := s.pool.Generation(t.URL); ok {
			have++
		}
	}
	add, kept := make([]target.Target, 0, len(ts)-have), make([]target.Target, 0, have)
	for _, t := range ts {
		if _, ok := s.pool.Generation(t.URL); ok {
			kept = append(kept, t)
		} else {
			add = append(add, t)
		}
	}
	var remove []string
	for _, u := range s.pool.Targets() {
		if !want[u] {
			remove = append(remove, u)
		}
	}
	s.pool.Add(kept) // their credentials, at once
	s.syncLabels(kept, nil)
	done := make(chan struct{})
	ch := &change{add: add, remove: remove, done: []chan struct{}{done}}
	if s.pending != nil {
		ch.done = append(s.pending.done, done)
	}
	s.pending = ch
	if len(add) > 0 {
		s.c.log.Info("targets added", "count", len(add), "targets", fewTargets(urlsOf(add)))
	}
	if len(remove) > 0 {
		s.c.log.Info("targets removed", "count", len(remove), "targets", fewTargets(remove))
	}
	s.applyMore()
	return done
}

// urlsOf returns the targets' URLs.
func urlsOf(ts []target.Target) []string {
	urls := make([]string, len(ts))
	for i, t := range ts {
		urls[i] = t.URL
	}
	return urls
}

// applyMore applies the next batch of the change in progress (removals first) and forgets the
// next batch of removed targets whose grace period is over.
func (s *state) applyMore() {
	s.forgetExpired()
	ch := s.pending
	if ch == nil {
		return
	}
	n := min(applyBatch, len(ch.remove))
	remove := ch.remove[:n]
	ch.remove = ch.remove[n:]
	add := ch.add[:min(applyBatch-n, len(ch.add))]
	ch.add = ch.add[len(add):]
	s.apply(add, remove)
	if len(ch.add) == 0 && len(ch.remove) == 0 {
		s.pending = nil
		for _, d := range ch.done {
			close(d)
		}
		return
	}
}

// settle ends the change in progress at shutdown: its removals take effect at once, before the
// last boundary scrape, which a target on its way out need not answer; its additions are
// dropped, as the first scrape of a new target is a baseline that counts nothing. Those who
// wait for it learn that the collector stopped.
func (s *state) settle() {
	if ch := s.pending; ch != nil {
		s.pending = nil
		s.apply(nil, ch.remove)
	}
}

// apply starts the targets add and stops the targets remove.
func (s *state) apply(add []target.Target, remove []string) {
	removed := s.pool.Remove(remove)
	now := s.c.opt.Clock.Now()
	for _, u := range removed {
		delete(s.targets, u)
		s.firstScraped(u)
		if s.boundary != nil {
			delete(s.boundary.pending, u)
		}
		// Its workers stay for the grace period: if it comes back within it, it goes on.
		s.removedAt[u] = now
		s.forgetQueue = append(s.forgetQueue, forgetLater{url: u, at: now})
	}
	var late []string // back after their grace period, not yet forgotten
	for _, t := range add {
		if at, ok := s.removedAt[t.URL]; ok {
			delete(s.removedAt, t.URL)
			if now.Sub(at) >= s.removedGrace() {
				late = append(late, t.URL)
			}
		}
	}
	s.forget(late)
	added := s.pool.Add(add)
	for _, u := range added {
		// Labels it had and still has (back within its grace period) are the tracker's already.
		s.targets[u] = &TargetState{URL: u, late: s.late, Labels: s.labels[u]}
		if s.late {
			// Connections it refuses before its first page say nothing of when its server
			// started: the tracker, and replay, must know it was not there from the start.
			s.tracker.Added(u)
			if rw := s.c.opt.Recorder; rw != nil {
				s.recordFailed(rw.Added(s.stamp(), u))
			}
		}
	}
	s.syncLabels(add, nil)
	if len(added) > 0 || len(removed) > 0 {
		s.c.opt.Observer.TargetsChanged(added, removed)
	}
	s.maybeClose()
}

// forgetExpired forgets up to a batch of the removed targets whose grace period is over, and
// notes whether more are left.
func (s *state) forgetExpired() {
	now := s.c.opt.Clock.Now()
	var urls []string
	for len(s.forgetQueue) > 0 && len(urls) < applyBatch {
		f := s.forgetQueue[0]
		if now.Sub(f.at) < s.removedGrace() {
			break
		}
		s.forgetQueue = s.forgetQueue[1:]
		if at, ok := s.removedAt[f.url]; ok && at.Equal(f.at) { // else back since, or removed again
			delete(s.removedAt, f.url)
			urls = append(urls, f.url)
		}
	}
	if len(s.forgetQueue) == 0 {
		s.forgetQueue = nil // let the backing array go
	}
	s.forgetMore = len(urls) == applyBatch && len(s.forgetQueue) > 0
	s.forget(urls)
}

// forget makes the tracker forget the workers of removed targets: if one comes back, it is a new
// worker whose first scrape is a baseline, not an increase over everything it counted while
// away. The recording says so at the same point, for replay.
func (s *state) forget(urls []string) {
	if len(urls) == 0 {
		return
	}
	s.tracker.Forget(urls...)
	for _, u := range urls {
		// Removed targets' labels are no longer known (the tracker keeps them for the open step
		// itself), so a target that comes back with labels gets them again.
		delete(s.labels, u)
		delete(s.policy.targets, u)
		delete(s.servers, u)
		if rw := s.c.opt.Recorder; rw != nil {
			s.recordFailed(rw.Removed(s.stamp(), u))
		}
	}
}
