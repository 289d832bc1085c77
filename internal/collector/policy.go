package collector

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/vllmstat/vllmstat/internal/scrape"
)

// PolicyVersion is a version of the trainer's weights, as published.
type PolicyVersion struct {
	Version int64 `json:"version"`
	// Name is the string the engines report for this version once they load it ("" for
	// none): see versionname.go.
	Name string    `json:"name,omitempty"`
	TS   time.Time `json:"ts"` // when it took effect: after a boundary scrape of every target
}

// ErrPolicyOrder is returned for a policy version not greater than the last one published.
var ErrPolicyOrder = errors.New("policy version must be greater than the last one")

// ErrPolicyRange is returned for a policy version outside 0..MaxStep: versions, like step
// numbers, survive JSON readers that keep numbers as float64.
var ErrPolicyRange = fmt.Errorf("policy version must be from 0 to %d (2^53)", MaxStep)

// ErrPolicyName is returned for a version's name that no engine could report as it is: empty,
// longer than scrape.MaxVersionTag bytes, not printable UTF-8, or a decimal number other than
// the version's own (an engine's decimal version is read as its number).
var ErrPolicyName = fmt.Errorf("policy version name must be 1 to %d bytes of printable UTF-8, and not a number other than the version's", scrape.MaxVersionTag)

// ErrPolicyNameTaken is returned for a name that already names another version.
var ErrPolicyNameTaken = errors.New("policy version name already names another version")

// Publish says that the trainer published version v of its weights, and returns once it took
// effect: after a boundary scrape of every target, as a phase edge, so that every scrape's
// tokens were generated wholly before or after it. Versions only grow: v must be greater than
// every version published or being published (ErrPolicyOrder, at once). From the first call on
// boundary scrapes read the engines' versions (this one's too: an engine that loaded v before
// the call holds it at the publish), and after the publish the next scrape of each engine that
// has not reported v yet reads it; an engine that then reports a version below v is read again
// at its next scrape, until it reports v or more (see step's policy.go for what the step
// records make of them). name, when not "", is the string the engines report once they load
// v, such as "step-42" (see versionname.go for how engines' strings are matched).
func (c *Collector) Publish(ctx context.Context, v int64, name string) (PolicyVersion, error) {
	if v < 0 || v > MaxStep {
		return PolicyVersion{}, fmt.Errorf("policy version %d: %w", v, ErrPolicyRange)
	}
	if name != "" {
		if why := scrape.VersionTagProblem(name); why != "" {
			return PolicyVersion{}, fmt.Errorf("policy version %d: name %s: %w", v, why, ErrPolicyName)
		}
		if n, ok := scrape.ParseDecimalVersion(name); ok && n != v {
			return PolicyVersion{}, fmt.Errorf("policy version %d: name is the number %d: %w", v, n, ErrPolicyName)
		}
	}
	reply := make(chan endResult, 1)
	if err := c.call(ctx, func(s *state) { s.requestPublish(v, name, reply) }); err != nil {
		return PolicyVersion{}, err
	}
	r := c.wait(ctx, reply)
	return r.policy, r.err
}

// policyState is what the collector knows of versions: the trainer's latest, and what each
// target's engine reported last.
type policyState struct {
	latest    int64
	published bool
	// requested is the latest version published or queued for its boundary scrapes, which a
	// new one must exceed.
	requested    int64
	anyRequested bool
	names        versionNames // the strings engines report for the versions requested
	targets      map[string]engineVersion
}

// engineVersion is what a target's engine reported last.
type engineVersion struct {
	v       int64
	reports bool // it reported v, or a string that is v; false: none, or not read yet
	failed  bool // its last reading failed
	// unmatched is the last string it reported that was no version, refused why its last
	// string was refused: each is logged when it changes.
	unmatched, refused string
}

// requestPublish queues the publish of version v named name. Whether v may be published is
// decided here, against the versions queued before it, so that a wrong one fails at once; its
// name counts from here, for the readings of its boundary scrapes.
func (s *state) requestPublish(v int64, name string, reply chan endResult) {
	p := &s.policy
	if p.anyRequested && v <= p.requested {
		reply <- endResult{err: fmt.Errorf("policy version %d: %w (the last one published is %d)", v, ErrPolicyOrder, p.requested)}
		return
	}
	if old, ok := p.names.taken(name); name != "" && ok {
		reply <- endResult{err: fmt.Errorf("policy version %d: %w (%d)", v, ErrPolicyNameTaken, old)}
		return
	}
	p.requested, p.anyRequested = v, true
	p.names.add(v, name)
	s.pool.ReadVersions()
	s.enqueue(endQuery{kind: queryPolicy, n: v, name: name, reply: reply})
}

// publish makes the publish q take effect at ts, after its boundary scrapes.
func (s *state) publish(q endQuery, ts time.Time) {
	p := &s.policy
	v := q.n
	s.tracker.Publish(v, ts)
	if rw := s.c.opt.Recorder; rw != nil {
		s.recordFailed(rw.Policy(ts, v))
	}
	p.latest, p.published = v, true
	var ask []string
	for _, u := range s.pool.Targets() {
		if ev := p.targets[u]; !ev.reports || ev.v < v {
			ask = append(ask, u)
		}
	}
	s.pool.AskVersion(ask)
	if q.reply != nil {
		q.reply <- endResult{policy: PolicyVersion{Version: v, Name: q.name, TS: ts}}
	}
}

// engineVersion takes the version reading of target's scrape at ts: the tracker and the
// recording get what changed, and an engine still behind the trainer's latest version is read
// again at its next scrape (after a failed reading, once).
func (s *state) engineVersion(ts time.Time, target string, r *scrape.VersionReading) {
	p := &s.policy
	if p.targets == nil {
		p.targets = map[string]engineVersion{}
	}
	cur, again := s.takeReading(p.targets[target], r, []any{"target", target}, func(v int64, reports bool) {
		s.tracker.EngineVersion(ts, target, v, reports)
		if rw := s.c.opt.Recorder; rw != nil {
			s.recordFailed(rw.EngineVersion(ts, target, v, reports))
		}
	})
	p.targets[target] = cur
	if again && p.published {
		s.pool.AskVersion([]string{target})
	}
}

// takeReading takes a version reading r of an engine (a target's, or a server's behind a
// router) that reported cur last, and returns what it reported now and whether to read it again
// at its next scrape: it is behind the trainer's latest version, or its reading failed for the
// first time (a failure is logged once, with who, the log attributes naming the engine). A
// string version is matched to the version it names; tell gets every change of version.
func (s *state) takeReading(cur engineVersion, r *scrape.VersionReading, who []any, tell func(v int64, reports bool)) (engineVersion, bool) {
	if r.Err == nil && !r.Reports && r.Tag != "" {
		r = s.matchTag(who, &cur, r)
	}
	if r.Refused != "" && r.Refused != cur.refused {
		s.c.log.Warn("the engine's weight version string is refused ("+r.Refused+"); its version is inferred", who...)
	}
	switch {
	case r.Err != nil:
		again := !cur.failed
		if again {
			s.c.log.Warn("reading the engine's weight version failed; its version is what it reported last, or what is inferred",
				append(who, "err", r.Err)...)
		}
		cur.failed = true
		return cur, again
	case r.Reports:
		if !cur.reports || cur.v != r.Version {
			tell(r.Version, true)
		}
		return engineVersion{v: r.Version, reports: true, unmatched: cur.unmatched}, r.Version < s.policy.latest
	}
	if cur.reports {
		tell(0, false)
	}
	return engineVersion{unmatched: cur.unmatched, refused: r.Refused}, false
}

// matchTag returns the reading r, whose version is the string r.Tag, as the version that
// string is (see versionname.go), or as none; a string that is none is logged when it changes.
// The string is scrape's: bounded and printable, and quoted all the same.
func (s *state) matchTag(who []any, cur *engineVersion, r *scrape.VersionReading) *scrape.VersionReading {
	if v, ok := s.policy.names.resolve(r.Tag); ok {
		return &scrape.VersionReading{Version: v, Reports: true}
	}
	if r.Tag != cur.unmatched {
		cur.unmatched = r.Tag
		s.c.log.Warn("the engine's weight version is no version the trainer published; its version is inferred",
			append(who, "weight_version", strconv.QuoteToASCII(r.Tag))...)
	}
	return &scrape.VersionReading{}
}
