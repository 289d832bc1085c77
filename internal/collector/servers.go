package collector

import (
	"net/url"
	"time"

	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/step"
)

// serverState is what the collector knows of the servers a router target's page names: what
// each one reported last, by worker_addr.
type serverState map[string]engineVersion

// serverVersions takes the version readings of the servers that target's router page names,
// read right after its scrape at ts, as engineVersion takes a target's: the tracker and the
// recording get what changed, a failed reading is logged once per server, and a target one of
// whose servers is still behind the trainer's latest version is read again at its next scrape.
func (s *state) serverVersions(ts time.Time, target string, rs []scrape.ServerVersion) {
	p := &s.policy
	if s.servers == nil {
		s.servers = map[string]serverState{}
	}
	m := s.servers[target]
	if m == nil {
		m = serverState{}
		s.servers[target] = m
	}
	again := false
	for i := range rs {
		r := &rs[i]
		who := []any{"target", target, "worker_addr", redacted(r.Addr)}
		cur, ask := s.takeReading(m[r.Addr], &r.VersionReading, who, func(v int64, reports bool) {
			s.tracker.ServerVersion(ts, target, r.Addr, v, reports)
			if rw := s.c.opt.Recorder; rw != nil {
				s.recordFailed(rw.ServerVersion(ts, target, r.Addr, v, reports))
			}
		})
		m[r.Addr] = cur
		again = again || ask
	}
	if again && p.published {
		s.pool.AskVersion([]string{target})
	}
}

// unversioned logs, once per engine, the engines that hold no known version after a publish:
// their target (or their server behind a router) reports none, and no pause, sleep, waking or
// weight load after a publish was seen on them, so every token they make counts as stale.
func (s *state) unversioned() {
	s.tracker.Unversioned(func(id step.WorkerID) {
		if s.toldUnversioned == nil {
			s.toldUnversioned = map[step.WorkerID]bool{}
		}
		if s.toldUnversioned[id] {
			return
		}
		s.toldUnversioned[id] = true
		s.c.log.Warn("an engine holds no known weight version: it reports none (or its version could not be read), and no pause, sleep, waking or weight load was seen on it since a publish; it counts as behind, and its tokens as stale",
			"target", id.Target, "engine", id.Engine, "labels", id.Labels)
	})
}

// redacted is a worker_addr as logs show it: without a password.
func redacted(addr string) string {
	if u, err := url.Parse(addr); err == nil {
		return u.Redacted()
	}
	return "(not a URL)"
}
