package step

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
	"github.com/vllmstat/vllmstat/internal/window"
)

// A successful scrape's page updates what the tracker keeps of its target and of each worker
// the page shows across steps (targetState, workerState), and adds the worker's figures to the
// open step and phase (see acc.go); a failed scrape books its span as unreachable. Whether a
// worker's first page is a baseline or counts whole is decided here (see Observe).

// workerState is what the tracker keeps of a worker across steps, until it is forgotten (see
// forgetDeparted).
type workerState struct {
	w    *window.Worker
	seen bool
	kind vllm.Engine // the kind of its last page
	// engine is set once a page shows the worker is an engine: only then is it in the time
	// ledger (see isEngine). slept is whether its last sample was asleep or waking from sleep.
	engine, slept bool
	seenAt        time.Time          // its last successful scrape, when seen
	busy          bool               // its last page may have shown requests in flight (see inFlight)
	inStep        uint64             // the seq of the last step in which a page of its target showed it
	page          uint64             // the number of the last successful page of its target that showed it
	loads         map[string]float64 // SGLang's last weight load durations by source; nil without the family
	// sg is what an SGLang worker's pages told the ledger (see sglangTime); nil for others, so
	// that a fleet of vLLM workers does not carry it.
	sg *sglangSeen
	pv policyWorker
}

// forgotten is a target forgotten: when, and whether it had answered in the run before.
type forgotten struct {
	at       time.Time
	answered bool
}

// targetState is what the tracker keeps of a target across steps.
type targetState struct {
	triedAt, lastOK     time.Time // its last scrape, and its last successful one
	hasTried, hasLastOK bool
	late                bool    // added while the run ran (Added)
	refused             bool    // every scrape of it so far was refused
	undated             bool    // Observe reported it undated
	answered            uint64  // the seq of the last step in which it answered
	pages               uint64  // its successful pages so far
	stepWorkers         int     // the workers its pages have shown in the open step, tokenizers apart
	stepTokenizers      int     // the SGLang tokenizers they have shown (see page.EnginePage.Tokenizer)
	reported            version // the version its engine reports; none when it reports none
	// engVer is the lowest version the engines of its last page held (hasEngines: it had
	// some), which the workers of the page that are no engines hold (see policySample).
	engVer     version
	hasEngines bool
	// servers are the versions the servers a router's page names report, by worker_addr, and
	// serverEngVer the lowest version each one's engines hold (see servers.go); nil for a
	// target that is no router.
	servers      map[string]version
	serverEngVer map[string]version
	// The workers of its last successful page, in page order: its next page nearly always has
	// the same ones in the same order, found so without hashing their names.
	engines []engineRef
}

// engineRef is a worker of a target's last page: its names, its state, and its share of the
// open step (nil until the worker's first scrape in it: EndStep clears it, so that a closed
// step is not kept alive by a target that went quiet).
type engineRef struct {
	engine, labels string
	ws             *workerState
	wa             *workerAcc
}

// Observe feeds one scrape of target taken at ts: its parsed page, or the error that made it
// fail. Timestamps must not go backwards. It reports undated the first time a page of target
// shows a worker for the first time with counts already made and no _created to date them:
// they are taken as a baseline, though the engine may have made them after the run started.
//
// One rule decides whether a worker's first page is a baseline: a worker first seen after
// evidence that it was not there counts whole, with or without _created, as a series that
// appears on a worker seen before does (package window). The evidence is
//   - earlier pages of its target in the run that did not show it (an SGLang server's tokenizer
//     series, a worker of their own with data parallelism, appear with its first finished
//     request; a data-parallel engine that comes up late), unless the run saw the worker before
//     and forgot it (see Forget, forgetDeparted), whose return forgetting's rule decides;
//   - every scrape of its target since the run started refused (Refused): its server started
//     during the run; unless the target was added while the run ran (Added).
//
// Without evidence a worker's first page is a baseline, unless _created dates its counts after
// its target's last answer.
func (t *Tracker) Observe(ts time.Time, target string, pg *page.Page, err error) (undated bool) {
	if !t.started {
		t.started, t.start = true, ts
	}
	t.now = ts
	tgt := t.targets[target]
	if tgt == nil {
		tgt = &targetState{}
		t.targets[target] = tgt
	}
	prevTry, tried := tgt.triedAt, tgt.hasTried
	tgt.triedAt, tgt.hasTried = ts, true
	pa := t.openPhase()
	if err != nil || pg == nil {
		tgt.tried(!tried, err)
		t.open.failed++
		if pa != nil {
			pa.acc.failed++
		}
		t.unreachable(target, tgt, prevTry, tried, ts, pa)
		return false
	}
	t.open.ok++
	if pa != nil {
		pa.acc.ok++
	}
	// A worker first seen on this page counts whole if there is evidence that it was not there
	// before: the target's earlier pages in the run did not show it, or its server refused
	// every connection since the run started. Otherwise it counts from zero if
	// it was created after the last time the target answered without it: on the target's first
	// answer, after the run started (after the step start for a recording without a start
	// event); on its first answer since Forget, after it was forgotten. Everything it counted
	// happened since, so it all belongs to this scrape's step. An engine that ran before the run
	// is a baseline: its earlier counts are nobody's.
	since := t.start
	if t.hasRunStart {
		since = t.runStart
	}
	absent := tgt.pages > 0 || tgt.refused && !tgt.late
	if f, ok := t.forgot[target]; ok {
		since = f.at
		absent = absent || f.answered
		delete(t.forgot, target)
	}
	if tgt.hasLastOK {
		since = tgt.lastOK
	}
	tgt.refused = false
	tgt.lastOK, tgt.hasLastOK = ts, true
	tgt.answered = t.seq
	tgt.pages++
	stepStart := float64(since.UnixNano()) / 1e9
	at := ts.Sub(t.start) // the offset of this scrape's samples in timelines
	k := &t.keep
	if len(tgt.engines) != len(pg.Engines) {
		// Workers came or went: find them all by name (EndStep clears only what is in use).
		tgt.engines = make([]engineRef, len(pg.Engines))
	}
	for i := range pg.Engines {
		ep := &pg.Engines[i]
		id := WorkerID{Target: target, Engine: ep.Engine, Labels: ep.Labels}
		ref := &tgt.engines[i]
		if ref.ws == nil || ref.engine != ep.Engine || ref.labels != ep.Labels {
			*ref = engineRef{engine: ep.Engine, labels: ep.Labels, ws: t.workers[id]}
			if ref.ws == nil {
				ref.ws = &workerState{w: window.NewWorkerSharing(&t.scratch)}
				ref.ws.pv.addr = page.WorkerAddr(ep.Labels)
				t.workers[id] = ref.ws
				if absent && !t.departed.has(id) {
					ref.ws.w.Absent()
				}
			}
		}
		if ref.wa == nil {
			ref.wa = t.open.workers[id]
			if ref.wa == nil {
				ref.wa = &workerAcc{}
				t.open.workers[id] = ref.wa
			}
		}
		ws, wa := ref.ws, ref.wa
		if ws.inStep != t.seq {
			ws.inStep = t.seq
			if ep.Tokenizer() {
				tgt.stepTokenizers++
			} else {
				tgt.stepWorkers++
			}
		}
		ws.page = tgt.pages
		ep = ws.w.Pick(ep) // the copy of its figures the worker keeps to
		inc := ws.w.Observe(ep, stepStart)
		if inc.Restarted {
			if len(t.restarts) < maxRestarts {
				t.restarts = append(t.restarts, Restart{Worker: id, At: ts})
			} else {
				t.restartsUnlisted++
			}
		}
		if inc.Undated && !tgt.undated {
			tgt.undated, undated = true, true
		}
		ws.kind = ep.Kind
		ws.engine = ws.engine || isEngine(ep)
		var state State
		var load int64
		var sg sgBooking
		if ws.engine {
			state, ws.slept = classify(ep, ws.slept)
			load = ws.newLoads(ep, ws.seen)
			if refreshedAtEvents[ep.Kind] {
				sg = ws.sglangTime(ep, &inc, state, ts)
				state = sg.s
			}
		}
		book := func(l *ledger, from time.Time) {
			if sg.split {
				l.addSplit(sg.from, from, ts, sg.idle, load, keepsSpans[ep.Kind])
			} else {
				l.add(from, ts, state, load, keepsSpans[ep.Kind])
			}
		}
		from := spanStart(prevTry, tried, t.start)
		wa.add(k, at, from, ts, ep, &inc)
		if ws.engine {
			book(&wa.led, from)
		}
		if pa != nil {
			pw := pa.acc.worker(id)
			from := spanStart(prevTry, tried, pa.since)
			pw.add(&t.phaseKeep, at, from, ts, ep, &inc)
			if ws.engine {
				book(&pw.led, from)
			}
		}
		busy := inFlight(ep)
		before := busy
		if ws.seen {
			before = ws.busy
		}
		wa.ends.add(before, busy)
		if pa != nil {
			pa.acc.worker(id).ends.add(before, busy)
		}
		ws.busy = busy
		wa.stale += t.policySample(ws, tgt, ts, weightStateOf(state, ws.engine), load, &inc)
		if t.opt.OnInterval != nil {
			t.opt.OnInterval(t.interval(id, ws, ts, ep, &inc))
			t.values = t.values[:0]
		}
		ws.seen, ws.seenAt = true, ts
	}
	tgt.engineVersions()
	return undated
}

// unreachable books the span of a failed scrape of target at ts (since its previous scrape,
// prevTry when tried) as unreachable to every engine its last page showed, in the open step
// and in the open phase pa.
func (t *Tracker) unreachable(target string, tgt *targetState, prevTry time.Time, tried bool, ts time.Time, pa *phaseAcc) {
	for i := range tgt.engines {
		ref := &tgt.engines[i]
		ws := ref.ws
		if ws == nil || !ws.engine {
			continue
		}
		id := WorkerID{Target: target, Engine: ref.engine, Labels: ref.labels}
		if ref.wa == nil {
			ref.wa = t.open.worker(id)
		}
		book := func(wa *workerAcc, since time.Time) {
			if wa.scrapes == 0 {
				wa.kind = ws.kind // down since the start: of its last page's kind
			}
			wa.led.add(spanStart(prevTry, tried, since), ts, Unreachable, 0, keepsSpans[ws.kind])
		}
		book(ref.wa, t.start)
		if pa != nil {
			book(pa.acc.worker(id), pa.since)
		}
	}
}

// inFlight reports whether a page may show requests in flight: requests running or waiting (a
// preempted request waits after its prefill), or no gauges to tell.
func inFlight(ep *page.EnginePage) bool {
	return !ep.HasGauge[vllm.Running] || !ep.HasGauge[vllm.Waiting] || ep.Gauges[vllm.Running] != 0 || ep.Gauges[vllm.Waiting] != 0
}
