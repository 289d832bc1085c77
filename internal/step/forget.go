package step

import (
	"slices"

	"github.com/vllmstat/vllmstat/internal/page"
)

// Forget drops every worker of the targets and their last-success times, for targets removed
// from the fleet. If a target comes back, its engines are new workers: the first scrape of each
// is a baseline, unless its _created says the engine started after the target last answered
// (or, when it never did, after the latest timestamp the tracker had been fed), in which case
// all of its count is new; and its first scrape stands for no busy or idle time. An engine the
// run never saw on the target counts whole (see Observe): the target's pages before it was
// forgotten did not show it. What the
// targets' workers already gave the open step stays in it, with their labels. Forgetting many
// targets in one call costs one pass over the workers, not one per target.
func (t *Tracker) Forget(targets ...string) {
	if len(targets) == 0 {
		return
	}
	gone := make(map[string]bool, len(targets))
	for _, target := range targets {
		gone[target] = true
	}
	for id := range t.workers {
		if gone[id.Target] {
			delete(t.workers, id)
			t.departed.add(id)
		}
	}
	for _, target := range targets {
		// The collector forgets a target some time after it left (it may come back meanwhile):
		// an engine that restarted in between is new since the target's last answer.
		// A target forgotten again before it answered keeps the time of its last answer.
		f := forgotten{at: t.now}
		if old, ok := t.forgot[target]; ok {
			f = old
		}
		if tgt := t.targets[target]; tgt != nil && tgt.hasLastOK {
			f = forgotten{at: tgt.lastOK, answered: true}
		}
		delete(t.targets, target)
		t.labels.forget(target)
		if t.started {
			t.forgot[target] = f
		}
	}
}

// forgetDeparted forgets, as the open step closes, every worker that departed: its target
// answered in the step, none of its target's successful pages in the step showed it, and
// neither did the last two (a step of one page, missing a worker once, does not make it go). A
// target that failed every scrape of the step keeps its workers: nothing says they left. A
// departed worker that comes back later is a new worker, as one first seen then: its first
// scrape is a baseline unless its _created is after its target's previous successful scrape.
// So an engine label that changes at every restart, or at every scrape, costs what the workers
// of the last step or two pages cost, not every worker the target ever had. It returns the
// workers forgotten, sorted.
func (t *Tracker) forgetDeparted() []WorkerID {
	var gone []WorkerID
	for id, ws := range t.workers {
		if ws.inStep == t.seq {
			continue
		}
		if tgt := t.targets[id.Target]; tgt != nil && tgt.answered == t.seq && tgt.pages-ws.page >= 2 {
			// tgt.engines, the workers of its last page (in this step), do not hold it.
			delete(t.workers, id)
			t.departed.add(id)
			gone = append(gone, id)
		}
	}
	slices.SortFunc(gone, WorkerID.Compare)
	return gone
}

// KeptWorkers is how many workers the tracker keeps state for (their windows and last values):
// those of its targets that it has not forgotten.
func (t *Tracker) KeptWorkers() int { return len(t.workers) }

// StepWorkers is how many workers target will have had in the open step once pg is observed:
// those its pages showed so far in the step, and those on pg new to it, SGLang's tokenizers
// apart (see StepTokenizers). The live collector bounds it by the per-target worker limit before
// a page is recorded or observed, so that a target whose engines change from scrape to scrape
// holds a bounded number of workers per step.
func (t *Tracker) StepWorkers(target string, pg *page.Page) int {
	return t.stepCount(target, pg, false)
}

// StepTokenizers is StepWorkers for SGLang's tokenizers (page.EnginePage.Tokenizer), which the
// per-target worker limit bounds on their own.
func (t *Tracker) StepTokenizers(target string, pg *page.Page) int {
	return t.stepCount(target, pg, true)
}

// stepCount is StepWorkers, or StepTokenizers when tokenizers is set.
func (t *Tracker) stepCount(target string, pg *page.Page, tokenizers bool) int {
	tgt := t.targets[target]
	n := 0
	if tgt != nil {
		n = tgt.stepWorkers
		if tokenizers {
			n = tgt.stepTokenizers
		}
	}
	for i := range pg.Engines {
		ep := &pg.Engines[i]
		if ep.Tokenizer() != tokenizers {
			continue
		}
		if tgt == nil {
			n++
			continue
		}
		var ws *workerState
		if i < len(tgt.engines) {
			// the workers of its last page, found without hashing their names (see Observe)
			if ref := &tgt.engines[i]; ref.engine == ep.Engine && ref.labels == ep.Labels {
				ws = ref.ws
			}
		}
		if ws == nil {
			ws = t.workers[WorkerID{Target: target, Engine: ep.Engine, Labels: ep.Labels}]
		}
		if ws == nil || ws.inStep != t.seq {
			n++
		}
	}
	return n
}
