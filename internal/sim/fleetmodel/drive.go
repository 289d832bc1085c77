package fleetmodel

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
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
	Waiting map[uint64]*drivenSpec // by request id, until the request finishes or is lost
	held    [][]*drivenSpec        // per engine: requests that reached it while it slept
	timers  []drivenTimer          // wake-ups and loads under way, in end order
	done    []func()               // answers to give once the pages show the results
	// finishing is, per server, whether a finish_weight_update waits for its load to end.
	finishing []bool
}

// drivenReq is one HTTP request's samples: reply gets them once every one has finished.
type drivenReq struct {
	samples []Sample
	left    int
	failed  error
	reply   func([]Sample, error)
}

type drivenSpec struct {
	spec  core.RequestSpec
	req   *drivenReq
	index int
}

// drivenTimer is the end of a control call that takes simulated time (a half of a wake-up, a
// weight load): at at, do (if any) changes the engines, and reply (if any) is answered once the
// pages show it.
type drivenTimer struct {
	at    time.Duration
	do    func(at time.Duration)
	reply func()
}

func (d *drive) init(servers, engines int) {
	d.Waiting = map[uint64]*drivenSpec{}
	d.held = make([][]*drivenSpec, engines)
	d.finishing = make([]bool, servers)
}

// after runs do at at and then answers reply: at once when at is not after the simulation's time,
// else when the simulation reaches at (see advanceDriven). Either may be nil.
func (s *Sim) after(at time.Duration, do func(at time.Duration), reply func()) {
	if at <= s.Time {
		if do != nil {
			do(s.Time)
		}
		if reply != nil {
			s.Drive.done = append(s.Drive.done, reply)
		}
		return
	}
	d := &s.Drive
	i := len(d.timers)
	d.timers = append(d.timers, drivenTimer{at, do, reply})
	for i > 0 && d.timers[i-1].at > at {
		d.timers[i], d.timers[i-1] = d.timers[i-1], d.timers[i]
		i--
	}
}

// Submit hands n samples of the prompt to one engine of server at the simulation's time: the
// same engine for every sample, chosen by the prompt, as a prefix-aware router of data-parallel
// engines would. Reply gets their lengths, in order, once every sample has finished, or an
// error when the server's restart lost one. An engine that sleeps holds them until it wakes up.
// Reply is called once the Sim's owner has published the pages that count the samples (the
// Fleet's run goroutine, after takeDriven). Submit refuses a prompt the model cannot take.
func (s *Sim) Submit(server int, p core.Prompt, n int, reply func([]Sample, error)) error {
	if server < 0 || server >= len(s.Servers) {
		return fmt.Errorf("submit: no server %d", server)
	}
	if n < 1 || n > MaxN {
		return fmt.Errorf("n must be from 1 to %d, got %d", MaxN, n)
	}
	p, err := p.Check(s.Cfg.MaxModelLen)
	if err != nil {
		return err
	}
	engines := s.Servers[server].Engines
	e := engines[p.Hash()%uint64(len(engines))]
	req := &drivenReq{samples: make([]Sample, n), left: n, reply: reply}
	for i := range n {
		s.Drive.nextID++
		id := drivenIDs + s.Drive.nextID
		ds := &drivenSpec{spec: s.promptSpec(p, id), req: req, index: i}
		s.Drive.Waiting[id] = ds
		if e.Stats.Res.Sleeping {
			k := s.engineIndex(e)
			s.Drive.held[k] = append(s.Drive.held[k], ds)
			continue
		}
		e.Submit(ds.spec)
	}
	return nil
}

func (s *Sim) engineIndex(e *core.Engine) int {
	i := 0
	for _, srv := range s.Servers[:e.Server] {
		i += len(srv.Engines)
	}
	return i + e.Index
}

// releaseHeld submits the requests engine e held while it slept, arriving at at.
func (s *Sim) releaseHeld(e *core.Engine, at time.Duration) {
	k := s.engineIndex(e)
	for _, ds := range s.Drive.held[k] {
		ds.spec.Arrival = at
		e.Submit(ds.spec)
	}
	s.Drive.held[k] = nil
}

// loseHeld fails the requests engine e held while it slept, which its server's restart lost; it
// returns how many there were.
func (s *Sim) loseHeld(e *core.Engine) int {
	k := s.engineIndex(e)
	held := s.Drive.held[k]
	s.Drive.held[k] = nil
	for _, ds := range held {
		s.requestDone(&core.Request{RequestSpec: ds.spec}, true)
	}
	return len(held)
}

// requestDone is every engine's hook at a request's finish or loss.
func (s *Sim) requestDone(r *core.Request, lost bool) {
	ds, ok := s.Drive.Waiting[r.ID]
	if !ok {
		return
	}
	delete(s.Drive.Waiting, r.ID)
	req := ds.req
	if lost {
		req.failed = fmt.Errorf("the server restarted and lost the request")
	} else {
		reason := snap.ReasonNames[snap.ReasonStop]
		if r.OutputLen >= r.MaxTokens {
			reason = snap.ReasonNames[snap.ReasonLength]
		}
		req.samples[ds.index] = Sample{PromptTokens: r.PromptLen, CompletionTokens: r.NumOutput, CachedTokens: r.CachedTokens, Reason: reason}
	}
	req.left--
	if req.left == 0 {
		s.Drive.done = append(s.Drive.done, func() { req.reply(req.samples, req.failed) })
	}
}

// takeDriven returns the answers due since the last call; the caller gives them after it has
// published the pages.
func (s *Sim) TakeDriven() []func() {
	d := s.Drive.done
	s.Drive.done = nil
	return d
}

// advanceDriven ends the driven wake-ups and loads due by t, each after the engines have run up
// to its end.
func (s *Sim) advanceDriven(t time.Duration) {
	for len(s.Drive.timers) > 0 && s.Drive.timers[0].at <= t {
		l := s.Drive.timers[0]
		s.Drive.timers = s.Drive.timers[1:]
		s.runEngines(l.at)
		if l.do != nil {
			l.do(l.at)
		}
		if l.reply != nil {
			s.Drive.done = append(s.Drive.done, l.reply)
		}
	}
}

// ErrBusy is the answer to a control call that needs idle engines while requests are in flight.
var ErrBusy = errors.New("requests are in flight: wait until they finish")

// ErrNoUpdate is the answer to the transfer or the end of a weight update that was not started.
var ErrNoUpdate = errors.New("no weight update was started")

// ErrFinishing is the answer to the end of a weight update that is being ended already.
var ErrFinishing = errors.New("the weight update is being finished already")

// at is the time a control call takes effect on e: now, or the end of its iteration in flight.
func (s *Sim) at(e *core.Engine) time.Duration { return max(s.Time, e.Time) }

// Sleep puts server's engines to sleep at level 1 (weights offloaded) or 2 (discarded), as vLLM's
// POST /sleep does, KV cache and prefix cache released; an engine asleep already stays as it
// is. The engines must be idle: vLLM's sleep is a trainer's call between rollouts.
func (s *Sim) Sleep(server, level int) error {
	if level != 1 && level != 2 {
		return fmt.Errorf("sleep level must be 1 or 2, got %d", level)
	}
	for _, e := range s.Servers[server].Engines {
		if e.Busy() || e.Pending() {
			return ErrBusy
		}
	}
	for _, e := range s.Servers[server].Engines {
		if !e.Stats.Res.Sleeping {
			e.Sleep(level, s.at(e))
		}
	}
	return nil
}

// WakeUp wakes server's sleeping engines up, as vLLM's POST /wake_up does with its tags: the
// weights, the KV cache, or both. Each half takes the workload's WakeTime, as in the colocated
// loop: the weights first, then the KV cache, the page showing the engine asleep until the
// weights are back and waking until the KV cache is. Once both are back the scheduler resumes
// and the requests that came during the sleep arrive. Reply (if any) is answered when the
// wake-up is done, as vLLM's endpoint answers.
func (s *Sim) WakeUp(server int, weights, kv bool, reply func()) {
	engines := s.Servers[server].Engines
	wake := s.Cfg.Workload.WakeTime
	at := s.Time
	asleep := func(want func(e *core.Engine) bool) bool {
		return slices.ContainsFunc(engines, func(e *core.Engine) bool { return e.Stats.Res.Sleeping && want(e) })
	}
	if weights && asleep(func(e *core.Engine) bool { return e.Stats.Res.Weights != snap.WeightsResident }) {
		at += wake
		s.after(at, func(at time.Duration) {
			for _, e := range engines {
				e.WakeWeights(at)
				if e.Stats.Res.Sleeping && e.Stats.Res.Kv == snap.KvResident {
					s.wakeKV(e, at) // the KV cache came back first
				}
			}
		}, nil)
	}
	if kv && asleep(func(e *core.Engine) bool { return e.Stats.Res.Kv != snap.KvResident }) {
		at += wake
		s.after(at, func(at time.Duration) {
			for _, e := range engines {
				s.wakeKV(e, at)
			}
		}, nil)
	}
	s.after(at, nil, reply)
}

// wakeKV brings a sleeping engine's KV cache back at at: with its weights resident the engine is
// awake and gets the requests it held; without, it waits for the weights' wake-up.
func (s *Sim) wakeKV(e *core.Engine, at time.Duration) {
	if !e.Stats.Res.Sleeping {
		return
	}
	if e.Stats.Res.Weights != snap.WeightsResident {
		e.Stats.Res.Kv = snap.KvResident
		e.Note(at)
		return
	}
	e.WakeKV(at)
	s.releaseHeld(e, at)
}

// Pause pauses server's engines as vLLM's POST /pause?mode=keep does: the requests they hold
// stay where they are, and those that arrive wait, until Resume. A sleeping engine is paused
// already.
func (s *Sim) Pause(server int) {
	for _, e := range s.Servers[server].Engines {
		if !e.Stats.Res.Paused {
			e.Pause(s.at(e))
		}
	}
}

// Resume resumes server's paused engines, except those asleep or loading weights, whose own
// calls end their pause.
func (s *Sim) Resume(server int) {
	for _, e := range s.Servers[server].Engines {
		if e.Stats.Res.Paused && !e.Stats.Res.Sleeping && !e.Sync.Loading {
			e.Resume(s.at(e))
		}
	}
}

// StartWeightUpdate starts a weight load on server's engines, as vLLM's POST
// /start_weight_update does: vllm:rl_weight_update_active is 1 until FinishWeightUpdate. An
// awake engine pauses for it.
func (s *Sim) StartWeightUpdate(server int) {
	for _, e := range s.Servers[server].Engines {
		if !e.Sync.Loading {
			e.BeginSync(s.at(e))
		}
	}
}

// loadEnd is when the weight load under way on server's engines has lasted the workload's
// LoadTime, and whether one is under way.
func (s *Sim) loadEnd(server int) (time.Duration, bool) {
	end, loading := time.Duration(0), false
	for _, e := range s.Servers[server].Engines {
		if e.Sync.Loading {
			end, loading = max(end, e.Stats.Rl.LoadStart+s.Cfg.Workload.LoadTime), true
		}
	}
	return end, loading
}

// UpdateWeights is the transfer of a weight update, as vLLM's POST /update_weights: the engines
// receive the weights for the workload's LoadTime from the update's start, and reply is answered
// then (at once for a later chunk of the same update). It needs a started update, as vLLM's
// worker does.
func (s *Sim) UpdateWeights(server int, reply func()) error {
	end, ok := s.loadEnd(server)
	if !ok {
		return ErrNoUpdate
	}
	s.after(end, nil, reply)
	return nil
}

// FinishWeightUpdate ends the weight load of server's engines with the given version, or the
// version they have when version is nil, as vLLM's POST /finish_weight_update does, once the
// load has lasted the workload's LoadTime: until then vllm:rl_weight_update_active stays 1.
// Reply (if any) is answered when the load has ended.
func (s *Sim) FinishWeightUpdate(server int, version *int, reply func()) error {
	end, ok := s.loadEnd(server)
	switch {
	case !ok:
		return ErrNoUpdate
	case s.Drive.finishing[server]:
		return ErrFinishing
	}
	s.Drive.finishing[server] = true
	s.after(end, func(at time.Duration) {
		s.Drive.finishing[server] = false
		for _, e := range s.Servers[server].Engines {
			v := e.Stats.CurrentVersion()
			if version != nil {
				v = *version
			}
			e.EndSync(max(at, e.Time), v)
		}
	}, reply)
	return nil
}

// SetWeightVersion sets the weight version of server's engines without a load, as POST
// /update_weight_version does on vLLM and SGLang.
func (s *Sim) SetWeightVersion(server, version int) {
	for _, e := range s.Servers[server].Engines {
		at := s.at(e)
		e.Stats.Version, e.Stats.HasVersion = version, true
		e.Led.Versions = append(e.Led.Versions, core.VersionChange{Version: version, At: at})
	}
}

// LoadWeights loads weights into server's engines as SGLang's POST /update_weights_from_disk
// does: the engines pause, load for the workload's LoadTime, take version (or keep theirs when
// it is nil) and resume; reply is called after the load. It returns the requests the pause held.
func (s *Sim) LoadWeights(server int, version *int, reply func()) int {
	engines := s.Servers[server].Engines
	held, end := 0, s.Time
	for _, e := range engines {
		held += len(e.Running) + e.Waiting.Len()
		end = max(end, e.BeginSync(s.at(e))+s.Cfg.Workload.LoadTime)
	}
	v := engines[0].Stats.CurrentVersion()
	if version != nil {
		v = *version
	}
	s.after(end, func(at time.Duration) {
		for _, e := range engines {
			e.EndSync(at, v)
		}
	}, reply)
	return held
}

// Sleeping and Paused report server's state as vLLM's GET /is_sleeping and /is_paused do: any
// engine asleep; any engine paused outside a sleep.
func (s *Sim) Sleeping(server int) bool {
	return slices.ContainsFunc(s.Servers[server].Engines, func(e *core.Engine) bool { return e.Stats.Res.Sleeping })
}

func (s *Sim) Paused(server int) bool {
	return slices.ContainsFunc(s.Servers[server].Engines, func(e *core.Engine) bool { return e.Halted() })
}
