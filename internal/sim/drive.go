package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// The Sim's side of driving the engines over HTTP: completion requests that a client sends (see
// openai.go) and the control calls of vLLM's and SGLang's servers (see control.go), applied to
// the model at the simulated time they arrive. The HTTP side hands them to the Fleet's run
// goroutine, which owns the Sim; answers go back once the pages show what the call did.

// drivenIDs numbers driven requests apart from the workload's (and from its eval batches').
const drivenIDs = 1 << 61

// Sample is one finished sample of a driven request: its prompt and output lengths as the
// engine's counters counted them, and vLLM's finish reason ("stop" or "length").
type Sample struct {
	PromptTokens, CompletionTokens int
	CachedTokens                   int
	Reason                         string
}

// drive is the Sim's driven requests and loads.
type drive struct {
	nextID  uint64
	waiting map[uint64]*drivenSpec // by request id, until the request finishes or is lost
	held    [][]*drivenSpec        // per engine: requests that reached it while it slept
	loads   []drivenLoad           // SGLang loads under way, in end order
	done    []func()               // answers to give once the pages show the results
}

// drivenReq is one HTTP request's samples: reply gets them once every one has finished.
type drivenReq struct {
	samples []Sample
	left    int
	failed  error
	reply   func([]Sample, error)
}

type drivenSpec struct {
	spec  RequestSpec
	req   *drivenReq
	index int
}

// drivenLoad is an SGLang weight load that ends at at with version.
type drivenLoad struct {
	at      time.Duration
	server  int
	version int
	reply   func()
}

func (d *drive) init(engines int) {
	d.waiting = map[uint64]*drivenSpec{}
	d.held = make([][]*drivenSpec, engines)
}

// Submit hands n samples of the prompt to one engine of server at the simulation's time: the
// same engine for every sample, chosen by the prompt, as a prefix-aware router of data-parallel
// engines would. Reply gets their lengths, in order, once every sample has finished, or an
// error when the server's restart lost one. An engine that sleeps holds them until it wakes up.
// Reply is called once the Sim's owner has published the pages that count the samples (the
// Fleet's run goroutine, after takeDriven). Submit refuses a prompt the model cannot take.
func (s *Sim) Submit(server int, p Prompt, n int, reply func([]Sample, error)) error {
	if server < 0 || server >= len(s.servers) {
		return fmt.Errorf("submit: no server %d", server)
	}
	if n < 1 || n > maxN {
		return fmt.Errorf("n must be from 1 to %d, got %d", maxN, n)
	}
	p, err := p.check(s.cfg.MaxModelLen)
	if err != nil {
		return err
	}
	engines := s.servers[server].engines
	e := engines[p.hash()%uint64(len(engines))]
	req := &drivenReq{samples: make([]Sample, n), left: n, reply: reply}
	for i := range n {
		s.drive.nextID++
		id := drivenIDs + s.drive.nextID
		ds := &drivenSpec{spec: s.promptSpec(p, id), req: req, index: i}
		s.drive.waiting[id] = ds
		if e.stats.res.sleeping {
			k := s.engineIndex(e)
			s.drive.held[k] = append(s.drive.held[k], ds)
			continue
		}
		e.Submit(ds.spec)
	}
	return nil
}

func (s *Sim) engineIndex(e *Engine) int {
	i := 0
	for _, srv := range s.servers[:e.server] {
		i += len(srv.engines)
	}
	return i + e.index
}

// releaseHeld submits the requests engine e held while it slept, arriving at at.
func (s *Sim) releaseHeld(e *Engine, at time.Duration) {
	k := s.engineIndex(e)
	for _, ds := range s.drive.held[k] {
		ds.spec.Arrival = at
		e.Submit(ds.spec)
	}
	s.drive.held[k] = nil
}

// loseHeld fails the requests engine e held while it slept, which its server's restart lost; it
// returns how many there were.
func (s *Sim) loseHeld(e *Engine) int {
	k := s.engineIndex(e)
	held := s.drive.held[k]
	s.drive.held[k] = nil
	for _, ds := range held {
		s.requestDone(&request{RequestSpec: ds.spec}, true)
	}
	return len(held)
}

// requestDone is every engine's hook at a request's finish or loss.
func (s *Sim) requestDone(r *request, lost bool) {
	ds, ok := s.drive.waiting[r.ID]
	if !ok {
		return
	}
	delete(s.drive.waiting, r.ID)
	req := ds.req
	if lost {
		req.failed = fmt.Errorf("the server restarted and lost the request")
	} else {
		reason := reasonNames[reasonStop]
		if r.OutputLen >= r.MaxTokens {
			reason = reasonNames[reasonLength]
		}
		req.samples[ds.index] = Sample{PromptTokens: r.PromptLen, CompletionTokens: r.numOutput, CachedTokens: r.cachedTokens, Reason: reason}
	}
	req.left--
	if req.left == 0 {
		s.drive.done = append(s.drive.done, func() { req.reply(req.samples, req.failed) })
	}
}

// takeDriven returns the answers due since the last call; the caller gives them after it has
// published the pages.
func (s *Sim) takeDriven() []func() {
	d := s.drive.done
	s.drive.done = nil
	return d
}

// advanceDriven ends the driven loads due by t, each after the engines have run up to its end.
func (s *Sim) advanceDriven(t time.Duration) {
	for len(s.drive.loads) > 0 && s.drive.loads[0].at <= t {
		l := s.drive.loads[0]
		s.drive.loads = s.drive.loads[1:]
		s.runEngines(l.at)
		for _, e := range s.servers[l.server].engines {
			e.endSync(l.at, l.version)
		}
		s.drive.done = append(s.drive.done, l.reply)
	}
}

// ErrBusy is the answer to a control call that needs idle engines while requests are in flight.
var ErrBusy = errors.New("requests are in flight: wait until they finish")

// ErrNoUpdate is the answer to the end of a weight update that was not started.
var ErrNoUpdate = errors.New("no weight update was started")

// at is the time a control call takes effect on e: now, or the end of its iteration in flight.
func (s *Sim) at(e *Engine) time.Duration { return max(s.now, e.now) }

// Sleep puts server's engines to sleep at level 1 (weights offloaded) or 2 (discarded), as vLLM's
// POST /sleep does, KV cache and prefix cache released; an engine asleep already stays as it
// is. The engines must be idle: vLLM's sleep is a trainer's call between rollouts.
func (s *Sim) Sleep(server, level int) error {
	if level != 1 && level != 2 {
		return fmt.Errorf("sleep level must be 1 or 2, got %d", level)
	}
	for _, e := range s.servers[server].engines {
		if e.Busy() || e.Pending() {
			return ErrBusy
		}
	}
	for _, e := range s.servers[server].engines {
		if !e.stats.res.sleeping {
			e.sleep(level, s.at(e))
		}
	}
	return nil
}

// WakeUp wakes server's sleeping engines up, as vLLM's POST /wake_up does with its tags: the
// weights, the KV cache, or both. Once both are back the scheduler resumes and the requests that
// came during the sleep arrive.
func (s *Sim) WakeUp(server int, weights, kv bool) {
	for _, e := range s.servers[server].engines {
		if !e.stats.res.sleeping {
			continue
		}
		at := s.at(e)
		if weights {
			e.wakeWeights(at)
		}
		if kv {
			if e.stats.res.weights == weightsResident {
				e.wakeKV(at)
			} else {
				e.stats.res.kv = kvResident
				e.note(at)
			}
		}
		if !e.stats.res.sleeping {
			s.releaseHeld(e, at)
		}
	}
}

// Pause pauses server's engines as vLLM's POST /pause?mode=keep does: the requests they hold
// stay where they are, and those that arrive wait, until Resume. A sleeping engine is paused
// already.
func (s *Sim) Pause(server int) {
	for _, e := range s.servers[server].engines {
		if !e.stats.res.paused {
			e.pause(s.at(e))
		}
	}
}

// Resume resumes server's paused engines, except those asleep or loading weights, whose own
// calls end their pause.
func (s *Sim) Resume(server int) {
	for _, e := range s.servers[server].engines {
		if e.stats.res.paused && !e.stats.res.sleeping && !e.sync.loading {
			e.resume(s.at(e))
		}
	}
}

// StartWeightUpdate starts a weight load on server's engines, as vLLM's POST
// /start_weight_update does: vllm:rl_weight_update_active is 1 until FinishWeightUpdate. An
// awake engine pauses for it.
func (s *Sim) StartWeightUpdate(server int) {
	for _, e := range s.servers[server].engines {
		if !e.sync.loading {
			e.beginSync(s.at(e))
		}
	}
}

// FinishWeightUpdate ends the weight load of server's engines with the given version, or the
// version they have when version is nil, as vLLM's POST /finish_weight_update does.
func (s *Sim) FinishWeightUpdate(server int, version *int) error {
	engines := s.servers[server].engines
	if !engines[0].sync.loading {
		return ErrNoUpdate
	}
	for _, e := range engines {
		v := e.stats.currentVersion()
		if version != nil {
			v = *version
		}
		e.endSync(s.at(e), v)
	}
	return nil
}

// SetWeightVersion sets the weight version of server's engines without a load, as POST
// /update_weight_version does on vLLM and SGLang.
func (s *Sim) SetWeightVersion(server, version int) {
	for _, e := range s.servers[server].engines {
		at := s.at(e)
		e.stats.version, e.stats.hasVersion = version, true
		e.led.versions = append(e.led.versions, VersionChange{version, at})
	}
}

// LoadWeights loads weights into server's engines as SGLang's POST /update_weights_from_disk
// does: the engines pause, load for the workload's LoadTime, take version (or keep theirs when
// it is nil) and resume; reply is called after the load. It returns the requests the pause held.
func (s *Sim) LoadWeights(server int, version *int, reply func()) int {
	engines := s.servers[server].engines
	held, end := 0, s.now
	for _, e := range engines {
		held += len(e.running) + e.waiting.len()
		end = max(end, e.beginSync(s.at(e))+s.cfg.Workload.LoadTime)
	}
	v := engines[0].stats.currentVersion()
	if version != nil {
		v = *version
	}
	i := len(s.drive.loads)
	s.drive.loads = append(s.drive.loads, drivenLoad{end, server, v, reply})
	for i > 0 && s.drive.loads[i-1].at > end {
		s.drive.loads[i], s.drive.loads[i-1] = s.drive.loads[i-1], s.drive.loads[i]
		i--
	}
	return held
}

// Sleeping and Paused report server's state as vLLM's GET /is_sleeping and /is_paused do: any
// engine asleep; any engine paused outside a sleep.
func (s *Sim) Sleeping(server int) bool {
	return slices.ContainsFunc(s.servers[server].engines, func(e *Engine) bool { return e.stats.res.sleeping })
}

func (s *Sim) Paused(server int) bool {
	return slices.ContainsFunc(s.servers[server].engines, func(e *Engine) bool { return e.halted() })
}
