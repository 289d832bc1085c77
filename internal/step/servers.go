package step

import (
	"time"
)

// Servers behind a router. A router's merged page (SGLang's /engine_metrics) names each
// worker's server by its worker_addr label, and each server reports its own version
// (ServerVersion): a worker of such a page holds what its server reports, or, where its server
// reports none, what is inferred of it as of any other worker. A server's tokenizer shares the
// versions of that server's engines, not of the router's others.

// ServerVersion says what the server that target's router page names addr (worker_addr)
// reported as its version at ts, right after the target's scrape at ts: version v when reports
// is set, none otherwise (its workers' versions are then inferred again, from what it last
// reported).
func (t *Tracker) ServerVersion(ts time.Time, target, addr string, v int64, reports bool) {
	tgt, nv := t.target(target), reportedVersion(v, reports)
	if tgt.servers == nil {
		// From now on the router's workers hold their servers' versions, not the router's.
		tgt.servers = map[string]version{}
		t.reportChanged(ts, tgt, tgt.reported, version{}, func(p *policyWorker) bool { return p.addr != "" })
	}
	old := tgt.servers[addr]
	if nv == old {
		return
	}
	tgt.servers[addr] = nv
	t.reportChanged(ts, tgt, old, nv, func(p *policyWorker) bool { return p.addr == addr })
}

// reportedOf is the version the worker's target reports for it: its server's, on a router's
// page whose servers were read.
func (tgt *targetState) reportedOf(p *policyWorker) version {
	if p.addr != "" && tgt.servers != nil {
		return tgt.servers[p.addr]
	}
	return tgt.reported
}

// enginesHold returns the lowest version the engines of the target's last page hold, of the
// server addr's alone when addr is set, and whether there were any.
func (tgt *targetState) enginesHold(addr string) (version, bool) {
	if addr == "" {
		return tgt.engVer, tgt.hasEngines
	}
	v, ok := tgt.serverEngVer[addr]
	return v, ok
}

// serverEngines takes an engine of server addr that holds v into the lowest of that server's.
func (tgt *targetState) serverEngines(addr string, v version) {
	if tgt.serverEngVer == nil {
		tgt.serverEngVer = map[string]version{}
	}
	if lo, ok := tgt.serverEngVer[addr]; !ok || lo.ok && (!v.ok || v.n < lo.n) {
		tgt.serverEngVer[addr] = v
	}
}

// Unversioned calls f with every engine of the policy keys that holds no known version while
// the trainer has published one: its target reports none for it, and none was inferred.
func (t *Tracker) Unversioned(f func(WorkerID)) {
	if !t.pol.latest.ok {
		return
	}
	for id, ws := range t.workers {
		tgt := t.targets[id.Target]
		if tgt == nil || !ws.pv.sampled || !tgt.policyEngine(ws) {
			continue
		}
		if !ws.pv.held(tgt.reportedOf(&ws.pv)).ok {
			f(id)
		}
	}
}
