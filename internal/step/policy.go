package step

import (
	"slices"
	"time"

	"github.com/vllmstat/vllmstat/internal/vllm"
	"github.com/vllmstat/vllmstat/internal/window"
)

// Policy versions. The trainer publishes versions of its weights (Publish): whole numbers that
// only grow. An engine holds a version: the one its target reports (EngineVersion), or, for a
// target that reports none, the one inferred from its samples' states in the time ledger: a
// version V lands on the worker at the end of its first pause, sleep, waking or weight load
// that started after V was published (its first sample in that state came after the publish;
// it ends at its first sample in another state), and until then it holds what it held before;
// before any publish nothing is known of it, and after one, a worker on which no version landed
// holds a version older than every one published. Waking counts apart from the sleep before
// it: a colocated trainer puts its engines to sleep before it trains, and syncs the new weights
// into them as they wake. A load no sample showed (SGLang's, told by its length once it is
// over: see the ledger) is the span the ledger books for it, ending at the scrape that shows
// it: it lands there the latest version published before the span's start (see loadLands).
//
// Stale tokens. A worker's sample at t_k ends the interval (t_k-1, t_k] since its previous
// sample, whose generation-token increase is stale when the worker's version at t_k-1 (after
// that scrape's own version reading) is older than the trainer's latest version at t_k. So the
// engine's side of an interval is its start: a version change observed at t_k, read from the
// engine or inferred from a pause that ended before t_k, counts from t_k on; when versions
// change at the end of a pause or a weight load, during which the engine generates nothing, and
// a scrape right after observes it, the interval before that scrape holds tokens of the old
// version only. The trainer's side is its end: the collector makes a publish take effect after
// a boundary scrape of every target, so that the interval in progress ends just before it and
// the next one's tokens are all generated after it. A worker's first sample (what it counted
// before vllmstat saw it) is never stale: nothing is known of its version then.

// weightState is what a worker's sample says of its weights, for the version inference.
type weightState uint8

const (
	stateOther weightState = iota
	statePaused
	stateAsleep
	stateWaking
	stateLoadingWeights
)

// weightStateOf is the weight state of a sample in ledger state s: generating and idle are one
// state, other; a worker whose pages do not show it is an engine (engine false) has no states.
func weightStateOf(s State, engine bool) weightState {
	if !engine {
		return stateOther
	}
	switch s {
	case Paused:
		return statePaused
	case Asleep:
		return stateAsleep
	case Waking:
		return stateWaking
	case LoadingWeights:
		return stateLoadingWeights
	}
	return stateOther
}

// version is a policy version, when ok; otherwise none is known (before any publish), or,
// once the trainer published one, one older than every version published.
type version struct {
	n  int64
	ok bool
}

// older reports that a worker holding v is behind the trainer's latest version latest.
func (v version) older(latest version) bool { return latest.ok && (!v.ok || v.n < latest.n) }

// policy is the tracker's account of the trainer's versions.
type policy struct {
	latest version
	pubs   []publish // every version published, oldest first
	// lags are the seconds from each version's publish to each worker holding it, for the
	// versions that landed in the open step, by the workers' engine kind.
	lags [vllm.NumEngines][]float64
}

type publish struct {
	v  int64
	at time.Time
}

// policyWorker is one worker's version bookkeeping across steps.
type policyWorker struct {
	sampled     bool   // it had a sample
	addr        string // the server a router's page names it by (worker_addr), "" for none
	first, last time.Time
	kind        vllm.Engine
	state       weightState // of its last sample
	// spanTo is the trainer's latest version when the run of samples in state began: what
	// lands when it ends (none when the span began before any publish, or is no span).
	spanTo   version
	inferred version
	// from is the worker's version at its last sample: the interval that began there is stale
	// when from is older than the trainer's latest version at its end.
	from version
}

// sample takes the worker's sample at ts in state s, whose generation-token increase is gen
// (hasGen: the page has the counter), with its target's reported version reported and the
// trainer's latest version latest; loaded is what a weight load the page shows over lands
// (see policy.loadLands), none without one. It returns the interval's stale tokens, and the
// worker's versions before and after the sample.
func (p *policyWorker) sample(ts time.Time, s weightState, gen float64, hasGen bool, reported, latest, loaded version) (stale float64, before, after version) {
	if p.sampled && hasGen && p.from.older(latest) {
		stale = gen
	}
	before = p.held(reported)
	if !p.sampled {
		p.first, p.state = ts, stateOther
	}
	if s != p.state {
		if p.state != stateOther && !reported.ok && p.spanTo.ok && (!p.inferred.ok || p.spanTo.n > p.inferred.n) {
			p.inferred = p.spanTo
		}
		p.spanTo = version{}
		if s != stateOther {
			p.spanTo = latest
		}
	}
	if !reported.ok && loaded.ok && (!p.inferred.ok || loaded.n > p.inferred.n) {
		p.inferred = loaded
	}
	p.state, p.last, p.sampled = s, ts, true
	after = p.held(reported)
	p.from = after
	return stale, before, after
}

// policySample takes a worker's sample at ts in weight state s with the increases inc, and
// returns its stale tokens; load is the nanoseconds of the weight loads its page shows over
// (see newLoads). A worker whose pages show no engine (SGLang's tokenizer, which
// counts a server's tokens beside its DP ranks' schedulers) has no states of its own: its tokens
// are stale by the lowest version its target's engines held at its previous scrape, and it is
// no engine of the policy keys.
func (t *Tracker) policySample(ws *workerState, tgt *targetState, ts time.Time, s weightState, load int64, inc *window.Increase) float64 {
	p := &ws.pv
	gen, hasGen := inc.Counters[vllm.GenerationTokens], inc.HasCounter[vllm.GenerationTokens]
	from, hasEngines := tgt.enginesHold(p.addr)
	shared := !ws.engine && hasEngines
	wasSampled := p.sampled
	stale, before, after := p.sample(ts, s, gen, hasGen, tgt.reportedOf(p), t.pol.latest, t.pol.loadLands(ts, load))
	p.kind = ws.kind
	if !shared {
		t.landed(ws, before, after, ts)
	}
	if shared {
		stale = 0
		if wasSampled && hasGen && from.older(t.pol.latest) {
			stale = gen
		}
	}
	return stale
}

// loadLands is the version a weight load of d nanoseconds lands, which a page at ts shows over
// (SGLang's weight_load_duration_seconds; see the ledger's comment): the latest published
// before the load's booked start ts-d, none when there is none. The load ended at or before
// the scrape, so it began at or before its booked start: a load booked to begin before a
// publish began before it, and loaded older weights. One booked to begin after it may have
// begun a little before it too (by at most the time since the worker's previous scrape); the
// collector's boundary scrape at each publish keeps that to loads that end in the first
// interval after it.
func (pol *policy) loadLands(ts time.Time, d int64) version {
	if d <= 0 {
		return version{}
	}
	start := ts.Add(-time.Duration(d))
	for i := len(pol.pubs) - 1; i >= 0; i-- { // the latest first: loads follow recent publishes
		if pol.pubs[i].at.Before(start) {
			return version{n: pol.pubs[i].v, ok: true}
		}
	}
	return version{}
}

// policyEngine reports whether a worker of target is an engine of the policy keys: all are but
// those that share their engines' versions (see policySample).
func (tgt *targetState) policyEngine(ws *workerState) bool {
	_, has := tgt.enginesHold(ws.pv.addr)
	return ws.engine || !has
}

// engineVersions keeps the lowest version the engines of target's last page hold: of each
// server a router's page names, apart (see servers.go).
func (tgt *targetState) engineVersions() {
	tgt.engVer, tgt.hasEngines = version{}, false
	clear(tgt.serverEngVer)
	for i := range tgt.engines {
		ws := tgt.engines[i].ws
		if ws == nil || !ws.engine || !ws.pv.sampled {
			continue
		}
		v := ws.pv.held(tgt.reportedOf(&ws.pv))
		if ws.pv.addr != "" {
			tgt.serverEngines(ws.pv.addr, v)
			continue
		}
		if !tgt.hasEngines || tgt.engVer.ok && (!v.ok || v.n < tgt.engVer.n) {
			tgt.engVer = v
		}
		tgt.hasEngines = true
	}
}

// reportedVersion is what an engine's reading says: version v when reports is set, none
// otherwise.
func reportedVersion(v int64, reports bool) version {
	if !reports {
		return version{}
	}
	return version{n: v, ok: true}
}

// held is the worker's version: its target's when the target reports one, else the inferred.
func (p *policyWorker) held(reported version) version {
	if reported.ok {
		return reported
	}
	return p.inferred
}

// Publish says that the trainer published version v of its weights at ts. Versions only grow:
// a version not greater than the latest is ignored, and Publish reports false.
func (t *Tracker) Publish(v int64, ts time.Time) bool {
	if t.pol.latest.ok && v <= t.pol.latest.n {
		return false
	}
	if !t.started {
		t.started, t.start = true, ts
	}
	t.now = ts
	t.pol.latest = version{n: v, ok: true}
	t.pol.pubs = append(t.pol.pubs, publish{v: v, at: ts})
	for id, ws := range t.workers { // the order does not matter: the lags are sorted
		p := &ws.pv
		tgt := t.targets[id.Target]
		if !p.sampled || tgt == nil || !tgt.policyEngine(ws) {
			continue
		}
		if cur := p.held(tgt.reportedOf(p)); cur.ok && cur.n >= v {
			t.pol.lags[p.kind] = append(t.pol.lags[p.kind], 0) // it holds v already
		}
	}
	return true
}

// EngineVersion says what target's engine reported as its version at ts, right after its
// scrape at ts: version v when reports is set, none otherwise (its workers' versions are then
// inferred again, from what they last reported).
func (t *Tracker) EngineVersion(ts time.Time, target string, v int64, reports bool) {
	tgt, nv := t.target(target), reportedVersion(v, reports)
	if nv == tgt.reported {
		return
	}
	old := tgt.reported
	tgt.reported = nv
	t.reportChanged(ts, tgt, old, nv, func(p *policyWorker) bool { return p.addr == "" || tgt.servers == nil })
}

// reportChanged takes the change of the version reported for the workers of target for which
// of is set, from old to nv at ts.
func (t *Tracker) reportChanged(ts time.Time, tgt *targetState, old, nv version, of func(*policyWorker) bool) {
	for i := range tgt.engines {
		ws := tgt.engines[i].ws
		if ws == nil || !ws.pv.sampled || !of(&ws.pv) {
			continue
		}
		p := &ws.pv
		before := p.held(old)
		if !nv.ok && old.ok && (!p.inferred.ok || old.n > p.inferred.n) {
			p.inferred = old // it held what it reported last
		}
		after := p.held(nv)
		if tgt.policyEngine(ws) {
			t.landed(ws, before, after, ts)
		}
		if p.last.Equal(ts) {
			p.from = after
		}
	}
	tgt.engineVersions()
}

// landed counts, when a worker's version went from a to b at ts, the lag of every version it
// now holds for the first time: those published in (a, b] after the worker was first seen.
func (t *Tracker) landed(ws *workerState, a, b version, ts time.Time) {
	if !b.ok || a.ok && b.n <= a.n {
		return
	}
	pubs := t.pol.pubs
	i := 0
	if a.ok {
		i, _ = slices.BinarySearchFunc(pubs, a.n+1, func(p publish, v int64) int {
			switch {
			case p.v < v:
				return -1
			case p.v > v:
				return 1
			}
			return 0
		})
	}
	for ; i < len(pubs) && pubs[i].v <= b.n; i++ {
		if !pubs[i].at.Before(ws.pv.first) {
			t.pol.lags[ws.pv.kind] = append(t.pol.lags[ws.pv.kind], ts.Sub(pubs[i].at).Seconds())
		}
	}
}

// The policy keys' names (without prefix).
const (
	NamePolicyVersion    = "policy/version"
	NameEngineVersionMin = "policy/engine_version_min"
	NameEngineVersionMax = "policy/engine_version_max"
	NameEnginesBehind    = "policy/engines_behind"
	NamePublishLag       = "policy/publish_lag_s"
	NameStaleTokens      = "policy/stale_generation_tokens"
	NameStaleFraction    = "policy/stale_token_fraction"
	NameWorkerVersionLag = "policy/lag"
	policyKeyName        = "policy" // the first part of every policy key
)

// policyKeys adds the policy keys of pool p's workers to r.Values, and each worker's version
// and lag to its per_worker record. ids and was are the step's workers, sorted, aligned with
// r.PerWorker (when present).
func (t *Tracker) policyKeys(r *Record, ids []WorkerID, was []*workerAcc, p kindPool, perWorker bool) {
	latest := t.pol.latest
	add := func(vs *[]vllm.Value, name, stat string, v float64) {
		*vs = append(*vs, vllm.Value{Name: name, Stat: stat, V: v, Kind: p.kind})
	}
	var lo, hi int64
	known, behind := 0, 0
	var stale, gen float64
	p.each(len(was), func(i int) {
		wa := was[i]
		stale += wa.stale
		if wa.has[vllm.GenerationTokens] {
			gen += wa.totals[vllm.GenerationTokens]
		}
		ws, tgt := t.workers[ids[i]], t.targets[ids[i].Target]
		if ws == nil || tgt == nil || !ws.pv.sampled || !tgt.policyEngine(ws) {
			return // its target left the fleet, or it is no engine
		}
		v := ws.pv.held(tgt.reportedOf(&ws.pv))
		if v.older(latest) {
			behind++
		}
		if !v.ok {
			return
		}
		if known == 0 || v.n < lo {
			lo = v.n
		}
		if known == 0 || v.n > hi {
			hi = v.n
		}
		known++
		if perWorker {
			add(&r.PerWorker[i].Values, NamePolicyVersion, "", float64(v.n))
			if latest.ok {
				add(&r.PerWorker[i].Values, NameWorkerVersionLag, "", float64(max(0, latest.n-v.n)))
			}
		}
	})
	if latest.ok {
		add(&r.Values, NamePolicyVersion, "", float64(latest.n))
		add(&r.Values, NameEnginesBehind, "", float64(behind))
		add(&r.Values, NameStaleTokens, "", stale)
		if gen > 0 {
			add(&r.Values, NameStaleFraction, "", stale/gen)
		}
	}
	if known > 0 {
		add(&r.Values, NameEngineVersionMin, "", float64(lo))
		add(&r.Values, NameEngineVersionMax, "", float64(hi))
	}
	if lags := t.pol.lags[p.kind]; len(lags) > 0 {
		// sorted, so that the mean adds them up in one order, whichever order they landed in
		xs := slices.Sorted(slices.Values(lags))
		var sum float64
		for _, x := range xs {
			sum += x
		}
		add(&r.Values, NamePublishLag, vllm.StatMean, sum/float64(len(xs)))
		add(&r.Values, NamePublishLag, vllm.StatMax, xs[len(xs)-1])
	}
}
