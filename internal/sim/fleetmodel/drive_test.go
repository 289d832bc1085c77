package fleetmodel

import (
	"errors"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// drivenConfig is a fleet that only its clients drive.
func drivenConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.Workload.Kind = workload.WorkloadNone
	return cfg
}

func newDrivenSim(t *testing.T, cfg fleetconfig.Config) *Sim {
	t.Helper()
	s, err := newSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// drivenResult is what a Submit's reply got.
type drivenResult struct {
	samples []Sample
	err     error
	done    bool
}

func submit(t *testing.T, s *Sim, server int, p core.Prompt, n int) *drivenResult {
	t.Helper()
	r := &drivenResult{}
	if err := s.Submit(server, p, n, func(samples []Sample, err error) { r.samples, r.err, r.done = samples, err, true }); err != nil {
		t.Fatal(err)
	}
	return r
}

// advance runs s to t and gives the answers due, as the fleet's run goroutine does.
func advance(s *Sim, t time.Duration) {
	s.AdvanceTo(t)
	for _, reply := range s.TakeDriven() {
		reply()
	}
}

func TestWorkloadNoneRunsNothingByItself(t *testing.T) {
	s := newDrivenSim(t, drivenConfig())
	advance(s, time.Minute)
	for k, v := range s.Totals() {
		if v != 0 {
			t.Errorf("%s = %v with no request sent", k, v)
		}
	}
}

// TestDrivenGroupHitsThePrefixCache sends a GRPO group (one prompt, n samples) and checks that
// the answer's counts are what the engine's counters gained and that the samples after the first
// found the prompt's full blocks in the prefix cache.
func TestDrivenGroupHitsThePrefixCache(t *testing.T) {
	s := newDrivenSim(t, drivenConfig())
	const n, promptLen, maxTokens = 4, 40, 8
	p := core.Prompt{Tokens: core.Tokenize(simtest.Words(promptLen, "w")), MaxTokens: maxTokens, IgnoreEOS: true}
	r := submit(t, s, 1, p, n)
	for at := time.Duration(0); !r.done && at < time.Minute; at += 10 * time.Millisecond {
		advance(s, at)
	}
	if !r.done || r.err != nil {
		t.Fatalf("request done %v, err %v", r.done, r.err)
	}
	var prompt, gen int
	for i, smp := range r.samples {
		if smp.PromptTokens != promptLen || smp.CompletionTokens != maxTokens || smp.Reason != "length" {
			t.Errorf("sample %d: %+v, want %d prompt and %d completion tokens, reason length", i, smp, promptLen, maxTokens)
		}
		prompt += smp.PromptTokens
		gen += smp.CompletionTokens
	}
	tot := s.Totals()
	if tot["prompt_tokens"] != float64(prompt) || tot["generation_tokens"] != float64(gen) {
		t.Errorf("counters gained %v prompt and %v generation tokens, the answers %d and %d",
			tot["prompt_tokens"], tot["generation_tokens"], prompt, gen)
	}
	// The first sample computes the prompt; the others reuse its full blocks, all but the block
	// of the last token, which is computed to give logits.
	hit := (promptLen - 1) / snap.BlockSize * snap.BlockSize
	if want := float64((n - 1) * hit); tot["prefix_cache_hits"] != want {
		t.Errorf("prefix cache hits %v, want %v", tot["prefix_cache_hits"], want)
	}
	// Server 0 saw nothing.
	var st snap.PageState
	s.FillPage(0, time.Unix(0, 0), &st)
	if st.Engines[0].PromptTokens != 0 {
		t.Errorf("server 0 counted %d prompt tokens of server 1's request", st.Engines[0].PromptTokens)
	}
}

func TestDrivenPromptsThatDoNotFitAreRefused(t *testing.T) {
	cfg := drivenConfig()
	s := newDrivenSim(t, cfg)
	for _, tc := range []struct {
		name string
		p    core.Prompt
		n    int
	}{
		{"prompt too long", core.Prompt{Tokens: make([]uint64, cfg.MaxModelLen)}, 1},
		{"prompt and max tokens too long", core.Prompt{Tokens: make([]uint64, 10), MaxTokens: cfg.MaxModelLen - 9}, 1},
		{"no sample", core.Prompt{Tokens: make([]uint64, 10)}, 0},
	} {
		if err := s.Submit(0, tc.p, tc.n, func([]Sample, error) { t.Errorf("%s: answered", tc.name) }); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	advance(s, time.Minute)
	if tot := s.Totals(); tot["prompt_tokens"] != 0 {
		t.Errorf("refused prompts counted %v prompt tokens", tot["prompt_tokens"])
	}
}

// TestDrivenSleepHoldsRequests puts a server to sleep, sends it a request, and checks that the
// request waits for both halves of the wake-up, and that a sleep with requests in flight is
// refused.
func TestDrivenSleepHoldsRequests(t *testing.T) {
	s := newDrivenSim(t, drivenConfig())
	if err := s.Sleep(0, 1); err != nil {
		t.Fatal(err)
	}
	if !s.Sleeping(0) || s.Sleeping(1) {
		t.Fatalf("sleeping: server 0 %v, server 1 %v; want only server 0", s.Sleeping(0), s.Sleeping(1))
	}
	r := submit(t, s, 0, core.Prompt{Tokens: core.Tokenize("a b c"), MaxTokens: 4}, 2)
	advance(s, 10*time.Second)
	s.WakeUp(0, true, false, nil)
	advance(s, 20*time.Second)
	if r.done {
		t.Fatal("a sleeping server answered")
	}
	if e := s.Servers[0].Engines[0]; e.LedgerState() != core.StateWaking {
		t.Errorf("after the weights' wake-up the engine is %s, want waking", e.LedgerState())
	}
	s.WakeUp(0, false, true, nil)
	if s.Sleeping(0) {
		t.Fatal("still sleeping after both wake-ups")
	}
	advance(s, 30*time.Second)
	if !r.done || r.err != nil {
		t.Fatalf("after the wake-up: done %v, err %v", r.done, r.err)
	}
	g := s.GroundTruth()
	if e := g.Engines[0]; e.Time[core.StateAsleep] != 10*time.Second || e.Time[core.StateWaking] != 10*time.Second {
		t.Errorf("engine 0 asleep %s and waking %s, want 10s each", e.Time[core.StateAsleep], e.Time[core.StateWaking])
	}

	submit(t, s, 0, core.Prompt{Tokens: core.Tokenize("a b c"), MaxTokens: 100, IgnoreEOS: true}, 1)
	advance(s, 30*time.Second+time.Millisecond)
	if err := s.Sleep(0, 1); !errors.Is(err, ErrBusy) {
		t.Errorf("sleep with a request in flight: %v, want ErrBusy", err)
	}
	if err := s.Sleep(1, 3); err == nil {
		t.Error("sleep level 3 accepted")
	}
}

// TestDrivenPauseAndWeightUpdate pauses a server with a request in flight, loads weights into it
// and checks the ledger states, the version and that the request finishes after the resume.
func TestDrivenPauseAndWeightUpdate(t *testing.T) {
	s := newDrivenSim(t, drivenConfig())
	r := submit(t, s, 0, core.Prompt{Tokens: core.Tokenize("a b c"), MaxTokens: 200, IgnoreEOS: true}, 1)
	advance(s, 100*time.Millisecond)
	s.Pause(0)
	if !s.Paused(0) {
		t.Fatal("not paused")
	}
	e := s.Servers[0].Engines[0]
	if e.LedgerState() != core.StatePaused {
		t.Errorf("paused engine is %s", e.LedgerState())
	}
	advance(s, time.Minute)
	if r.done {
		t.Fatal("a paused server finished its request")
	}
	if err := s.FinishWeightUpdate(0, nil, nil); !errors.Is(err, ErrNoUpdate) {
		t.Errorf("finish without a start: %v, want ErrNoUpdate", err)
	}
	s.StartWeightUpdate(0)
	if e.LedgerState() != core.StateLoadingWeights || !e.Stats.Rl.Active {
		t.Errorf("loading engine is %s, active %v", e.LedgerState(), e.Stats.Rl.Active)
	}
	advance(s, time.Minute+2*time.Second)
	v := 7
	if err := s.FinishWeightUpdate(0, &v, nil); err != nil {
		t.Fatal(err)
	}
	if e.Stats.CurrentVersion() != 7 || e.Stats.Rl.Updates != 1 || e.Stats.Rl.Active {
		t.Errorf("after the load: version %d, updates %d, active %v", e.Stats.CurrentVersion(), e.Stats.Rl.Updates, e.Stats.Rl.Active)
	}
	if e.LedgerState() != core.StatePaused {
		t.Errorf("after a load inside a pause the engine is %s, want paused", e.LedgerState())
	}
	s.Resume(0)
	advance(s, 2*time.Minute)
	if !r.done || r.err != nil || r.samples[0].CompletionTokens != 200 {
		t.Fatalf("after the resume: done %v, err %v, samples %+v", r.done, r.err, r.samples)
	}
	s.SetWeightVersion(0, 9)
	g := s.GroundTruth().Engines[0]
	if g.Time[core.StateLoadingWeights] != 2*time.Second {
		t.Errorf("loading for %s, want 2s", g.Time[core.StateLoadingWeights])
	}
	if n := len(g.Versions); n != 2 || g.Versions[0].Version != 7 || g.Versions[1].Version != 9 {
		t.Errorf("versions %+v, want 7 then 9", g.Versions)
	}
}

// TestDrivenRestartLosesRequests checks that the requests a restart loses, running or held by a
// sleeping engine, are answered with an error.
func TestDrivenRestartLosesRequests(t *testing.T) {
	cfg := drivenConfig()
	cfg.Faults = []fleetconfig.Fault{{Kind: fleetconfig.FaultRestart, At: time.Second, Server: fleetconfig.AllServers}}
	s := newDrivenSim(t, cfg)
	running := submit(t, s, 0, core.Prompt{Tokens: core.Tokenize("a b c"), MaxTokens: 1000, IgnoreEOS: true}, 2)
	if err := s.Sleep(1, 1); err != nil {
		t.Fatal(err)
	}
	held := submit(t, s, 1, core.Prompt{Tokens: core.Tokenize("a b c"), MaxTokens: 10}, 1)
	advance(s, 2*time.Second)
	for name, r := range map[string]*drivenResult{"running": running, "held": held} {
		if !r.done || r.err == nil {
			t.Errorf("%s request after a restart: done %v, err %v; want an error", name, r.done, r.err)
		}
	}
	if lost := s.Totals()["requests_lost"]; lost != 3 {
		t.Errorf("%v requests lost, want 3", lost)
	}
}

func TestTokenize(t *testing.T) {
	a, b := core.Tokenize("the same  words\there"), core.Tokenize("the same words here and more")
	if len(a) != 4 || len(b) != 6 {
		t.Fatalf("%d and %d tokens, want 4 and 6", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] || a[i] >= core.VocabSize {
			t.Errorf("token %d: %d and %d", i, a[i], b[i])
		}
	}
	if a[0] == a[1] {
		t.Error("two words, one id")
	}
	if n := len(core.Tokenize(" ")); n != 1 {
		t.Errorf("an empty prompt is %d tokens, want 1", n)
	}
}

// TestDrivenWakeAndLoadTakeTime checks that a driven wake-up takes the workload's WakeTime per
// half and a driven weight load its LoadTime, on the simulation's clock, as in the colocated
// loop: the engine shows asleep, then waking, loading_weights for LoadTime, and each call's
// answer comes when its effect is over.
func TestDrivenWakeAndLoadTakeTime(t *testing.T) {
	cfg := drivenConfig()
	cfg.Workload.WakeTime, cfg.Workload.LoadTime = time.Second, 2*time.Second
	s := newDrivenSim(t, cfg)
	e := s.Servers[0].Engines[0]
	if err := s.Sleep(0, 1); err != nil {
		t.Fatal(err)
	}
	r := submit(t, s, 0, core.Prompt{Tokens: core.Tokenize("a b c"), MaxTokens: 4}, 1)
	advance(s, 10*time.Second)
	woke := false
	s.WakeUp(0, true, true, func() { woke = true })
	for _, st := range []struct {
		at    time.Duration
		state core.State
	}{{10*time.Second + 999*time.Millisecond, core.StateAsleep}, {11 * time.Second, core.StateWaking}, {12*time.Second - time.Millisecond, core.StateWaking}} {
		advance(s, st.at)
		if e.LedgerState() != st.state || woke || r.done {
			t.Fatalf("at %s: %s, wake-up answered %v, request done %v; want %s, neither", st.at, e.LedgerState(), woke, r.done, st.state)
		}
	}
	advance(s, 12*time.Second)
	if !woke || s.Sleeping(0) {
		t.Fatalf("at 12s: wake-up answered %v, sleeping %v; want awake", woke, s.Sleeping(0))
	}
	advance(s, 20*time.Second)
	if !r.done || r.err != nil {
		t.Fatalf("the held request: done %v, err %v", r.done, r.err)
	}

	if err := s.UpdateWeights(0, func() {}); !errors.Is(err, ErrNoUpdate) {
		t.Errorf("transfer without a start: %v, want ErrNoUpdate", err)
	}
	s.StartWeightUpdate(0)
	transferred, finished := false, false
	if err := s.UpdateWeights(0, func() { transferred = true }); err != nil {
		t.Fatal(err)
	}
	v := 4
	if err := s.FinishWeightUpdate(0, &v, func() { finished = true }); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishWeightUpdate(0, &v, nil); !errors.Is(err, ErrFinishing) {
		t.Errorf("a second finish: %v, want ErrFinishing", err)
	}
	advance(s, 22*time.Second-time.Millisecond)
	if !e.Stats.Rl.Active || e.LedgerState() != core.StateLoadingWeights || transferred || finished {
		t.Fatalf("before LoadTime: active %v, %s, answered %v %v; want loading, unanswered", e.Stats.Rl.Active, e.LedgerState(), transferred, finished)
	}
	advance(s, 22*time.Second)
	if e.Stats.Rl.Active || !transferred || !finished || e.Stats.CurrentVersion() != 4 {
		t.Fatalf("after LoadTime: active %v, answered %v %v, version %d", e.Stats.Rl.Active, transferred, finished, e.Stats.CurrentVersion())
	}
	if d := e.Stats.Rl.Duration; d.Count != 1 || d.Sum != 2 {
		t.Errorf("rl_weight_update_duration_seconds count %d sum %v, want one load of 2s", d.Count, d.Sum)
	}
	g := s.GroundTruth().Engines[0]
	if g.Time[core.StateAsleep] != 11*time.Second || g.Time[core.StateWaking] != time.Second || g.Time[core.StateLoadingWeights] != 2*time.Second {
		t.Errorf("asleep %s, waking %s, loading %s; want 11s, 1s, 2s", g.Time[core.StateAsleep], g.Time[core.StateWaking], g.Time[core.StateLoadingWeights])
	}
}

// TestDrivenWakeKVFirst wakes the KV cache before the weights, in two calls: the engine is awake
// once both are back, whichever came first, and gets the requests it held.
func TestDrivenWakeKVFirst(t *testing.T) {
	s := newDrivenSim(t, drivenConfig())
	if err := s.Sleep(0, 1); err != nil {
		t.Fatal(err)
	}
	r := submit(t, s, 0, core.Prompt{Tokens: core.Tokenize("a b c"), MaxTokens: 4}, 1)
	s.WakeUp(0, false, true, nil)
	if !s.Sleeping(0) {
		t.Fatal("awake with the weights still offloaded")
	}
	s.WakeUp(0, true, false, nil)
	if s.Sleeping(0) {
		t.Fatal("still sleeping with the weights and the KV cache back")
	}
	advance(s, 10*time.Second)
	if !r.done || r.err != nil {
		t.Fatalf("the held request: done %v, err %v", r.done, r.err)
	}
}
