package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/core"
)

// Workload kinds.
const (
	WorkloadGRPO    = "grpo"
	WorkloadPoisson = "poisson"
	// WorkloadNone is no built-in workload: only the requests and control calls that clients
	// send over HTTP drive the engines (see drive.go).
	WorkloadNone = "none"
)

// WorkloadConfig describes the requests the fleet serves. Times are simulated time.
type WorkloadConfig struct {
	// Kind is "grpo" (rollout batches, the default), "poisson" (steady serving) or "none" (only
	// what clients send).
	Kind string

	// Prompts and Samples shape a GRPO batch: Prompts questions, each sampled Samples times.
	// All samples of a question go to the same engine, as a prefix-aware router would send them.
	Prompts, Samples int
	// Dataset is the number of distinct questions GRPO batches cycle through, epoch after
	// epoch; 0 gives every batch new questions.
	Dataset int
	// Batches stops the GRPO workload after that many batches; 0 runs batches forever.
	Batches int
	// Pause is the gap between the end of one batch and the start of the next: the trainer's
	// update.
	Pause time.Duration
	// StartDelay is when the first batch (or the first Poisson arrival) may come, so that a
	// scraper starting with the fleet sees an idle page first.
	StartDelay time.Duration

	// Rate is the Poisson workload's arrival rate in requests per simulated second, fleet-wide.
	Rate float64
	// Questions is the number of distinct questions the Poisson workload draws from; a repeated
	// question is a longer shared prefix.
	Questions int

	// SystemTokens is the length of the system prompt every request starts with.
	SystemTokens int
	// QuestionTokensMin and QuestionTokensMax bound the length of the question after it.
	QuestionTokensMin, QuestionTokensMax int
	// OutputMedian and OutputSigma give the lognormal distribution of output lengths; outputs
	// reaching MaxTokens are cut there and finish with reason "length".
	OutputMedian int
	OutputSigma  float64
	MaxTokens    int

	// Straggler makes the fleet's last engine (the last engine of the last server) a straggler:
	// every request routed to it generates Straggler times the output it would otherwise draw,
	// and asks for Straggler times MaxTokens, cut to what fits in the model length. Its batch
	// share then takes about that much longer, as a rollout worker given the hardest prompts
	// does. 1 means no straggler; it must not be less.
	Straggler float64

	// Abort is the share of the built-in workloads' requests their client aborts once the
	// request has generated part of its output (at least one token, fewer than it would have):
	// an RL trainer's partial rollouts and oversampling, which stop the requests they no longer
	// need. Which requests, and when, follows from each request's id and the seed, so the
	// workload's other draws stay as they were. 0 aborts none.
	Abort float64

	// Colocated makes the GRPO workload a colocated synchronous RL loop, in which the trainer
	// shares the engines' GPUs. Once a batch has finished on every engine (and its eval batch
	// after it, when one is due), every engine is put to sleep as vLLM's LLM.sleep() does at
	// level 1: weights offloaded, KV cache and prefix cache discarded, nothing running. It
	// sleeps for TrainTime, the trainer's update, and wakes up with the step's weights
	// (WakeTime, LoadTime); the next rollout starts Pause after the wake-up. Pages of vLLM 0.20
	// show the sleep, the wake-up and the loads (see weights.go). See LoopEdge for the loop's
	// timeline.
	Colocated bool
	// TrainTime is how long the engines sleep in each step of the colocated loop; 0 means as
	// long as the step's rollout batch took.
	TrainTime time.Duration
	// EvalEvery makes every EvalEvery-th step of the colocated loop (steps EvalEvery,
	// 2*EvalEvery, ...) run an eval batch after its rollout batch and before the training
	// time; 0 runs none.
	EvalEvery int
	// EvalPrompts is the number of questions in an eval batch, each sampled Samples times; 0
	// means a quarter of Prompts (at least one). Every eval batch asks the same held-out
	// questions, none of which is a training question.
	EvalPrompts int
	// WakeTime is how long each half of a wake-up takes: the weights', then, after the load, the
	// KV cache's, in the colocated loop and on the engines of workload none that their clients
	// wake up. 0 wakes the engines at once.
	WakeTime time.Duration

	// Async makes the workload (GRPO batches, one after another, or Poisson arrivals) run under
	// an asynchronous RL trainer: the engines never sleep, the trainer publishes a new policy
	// version every StepTime, and each engine pauses and loads it at its own time, one of them
	// Lag late (see async.go).
	Async bool
	// StepTime is the async trainer's step: the time between two publishes.
	StepTime time.Duration
	// Lag is how much later than its own time the async loop's lagging engine syncs each
	// version.
	Lag time.Duration
	// LoadTime is how long a weight load takes, in the colocated and the async loop, and on the
	// engines of workload none that their clients load weights into.
	LoadTime time.Duration
}

// DefaultWorkload returns the GRPO workload DefaultConfig uses: sized so that a fleet of four
// engines takes 5–10 s per batch, fills its KV caches and preempts a little.
func DefaultWorkload() WorkloadConfig {
	return WorkloadConfig{
		Kind:              WorkloadGRPO,
		Prompts:           32,
		Samples:           8,
		Pause:             2 * time.Second,
		StartDelay:        time.Second,
		Rate:              40,
		Questions:         500,
		SystemTokens:      512,
		QuestionTokensMin: 64,
		QuestionTokensMax: 448,
		OutputMedian:      250,
		OutputSigma:       0.8,
		MaxTokens:         1024,
		Straggler:         1,
	}
}

func (w WorkloadConfig) Validate(maxModelLen int) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch w.Kind {
	case WorkloadGRPO:
		if w.Prompts < 1 {
			bad("workload prompts must be positive, got %d", w.Prompts)
		}
		if w.Samples < 1 {
			bad("workload samples must be positive, got %d", w.Samples)
		}
		if w.Dataset != 0 && w.Dataset < w.Prompts {
			bad("workload dataset must be 0 (no repeats) or at least the %d prompts of a batch, got %d", w.Prompts, w.Dataset)
		}
		if w.Batches < 0 {
			bad("workload batches must not be negative, got %d", w.Batches)
		}
		if w.Pause < 0 {
			bad("workload pause must not be negative, got %s", w.Pause)
		}
		if w.TrainTime < 0 {
			bad("workload train time must not be negative, got %s", w.TrainTime)
		}
		if w.EvalEvery < 0 {
			bad("workload eval every must be 0 (no eval batches) or a number of steps, got %d", w.EvalEvery)
		}
		if w.EvalPrompts < 0 {
			bad("workload eval prompts must be 0 (a quarter of the prompts) or positive, got %d", w.EvalPrompts)
		}
		if !w.Colocated {
			if w.TrainTime != 0 {
				bad("workload train time %s needs the colocated loop: the engines sleep for it", w.TrainTime)
			}
			if w.EvalEvery != 0 {
				bad("workload eval every %d needs the colocated loop, which runs eval batches between rollout and training", w.EvalEvery)
			}
		}
	case WorkloadPoisson:
		if !(w.Rate > 0) || math.IsInf(w.Rate, 0) {
			bad("workload rate must be a positive number of requests per second, got %v", w.Rate)
		}
		if w.Questions < 1 {
			bad("workload questions must be positive, got %d", w.Questions)
		}
	case WorkloadNone:
		if w.Async || w.Colocated {
			bad("the async and the colocated loop need a built-in workload, not %q: with it, clients sync the weights", w.Kind)
		}
	default:
		bad("workload kind %q is not %q, %q or %q", w.Kind, WorkloadGRPO, WorkloadPoisson, WorkloadNone)
	}
	if !w.Colocated && w.Kind != WorkloadNone && w.WakeTime != 0 {
		bad("workload wake time %s needs the colocated loop, or workload %q, whose engines wake up", w.WakeTime, WorkloadNone)
	}
	if w.Colocated && w.Kind != WorkloadGRPO {
		bad("the colocated loop needs the %q workload, got %q", WorkloadGRPO, w.Kind)
	}
	if w.WakeTime < 0 || w.LoadTime < 0 || w.StepTime < 0 || w.Lag < 0 {
		bad("workload wake time, load time, step time and lag must not be negative, got %s, %s, %s and %s",
			w.WakeTime, w.LoadTime, w.StepTime, w.Lag)
	}
	switch {
	case w.Async && w.Colocated:
		bad("the async loop and the colocated loop exclude each other: the async loop's engines never sleep")
	case w.Async && w.StepTime <= w.Lag+w.LoadTime+2*Handoff:
		bad("workload step time %s must be longer than the lag (%s), the load time (%s) and two handoffs (%s), "+
			"so that every engine has synced a version before the next", w.StepTime, w.Lag, w.LoadTime, 2*Handoff)
	case !w.Async && (w.StepTime != 0 || w.Lag != 0):
		bad("workload step time and lag need the async loop, whose trainer publishes every step time")
	case !w.Async && !w.Colocated && w.Kind != WorkloadNone && w.LoadTime != 0:
		bad("workload load time %s needs the colocated or the async loop, or workload %q, which load weights", w.LoadTime, WorkloadNone)
	}
	if w.StartDelay < 0 {
		bad("workload start delay must not be negative, got %s", w.StartDelay)
	}
	if w.SystemTokens < 0 {
		bad("workload system tokens must not be negative, got %d", w.SystemTokens)
	}
	if w.QuestionTokensMin < 1 || w.QuestionTokensMax < w.QuestionTokensMin {
		bad("workload question tokens must satisfy 1 <= min <= max, got min %d max %d", w.QuestionTokensMin, w.QuestionTokensMax)
	}
	if w.OutputMedian < 1 {
		bad("workload output median must be positive, got %d", w.OutputMedian)
	}
	if w.OutputSigma < 0 || math.IsNaN(w.OutputSigma) || math.IsInf(w.OutputSigma, 0) {
		bad("workload output sigma must be a non-negative number, got %v", w.OutputSigma)
	}
	if !(w.Abort >= 0 && w.Abort <= 1) {
		bad("workload abort share must be a number from 0 to 1, got %v", w.Abort)
	}
	if !(w.Straggler >= 1) || math.IsInf(w.Straggler, 0) {
		bad("workload straggler factor must be a number of at least 1 (1 means no straggler), got %v", w.Straggler)
	}
	if w.MaxTokens < 1 {
		bad("workload max tokens must be positive, got %d", w.MaxTokens)
	}
	if n := w.SystemTokens + w.QuestionTokensMax + w.MaxTokens; n > maxModelLen {
		bad("workload requests of up to %d tokens (system %d + question %d + max tokens %d) exceed max model len %d",
			n, w.SystemTokens, w.QuestionTokensMax, w.MaxTokens, maxModelLen)
	}
	return errors.Join(errs...)
}

// generator turns a WorkloadConfig and a seed into request specs. All randomness of a simulation
// comes from here, drawn in a fixed order, which is what makes a run repeatable from its seed.
type Generator struct {
	cfg     WorkloadConfig
	engines int
	// maxModelLen bounds the straggler's longer requests.
	maxModelLen int
	rng         *rand.Rand
	sysSeed     uint64
	seed        uint64
	nextID      uint64

	// Eval batches draw from a stream of their own and number their requests from evalIDs on,
	// so that they change nothing in the rollout batches.
	evalRng    *rand.Rand
	nextEvalID uint64

	nextArrival time.Duration // Poisson only
}

func NewGenerator(cfg WorkloadConfig, engines, maxModelLen int, seed int64) *Generator {
	s := uint64(seed)
	g := &Generator{
		cfg:         cfg,
		engines:     engines,
		maxModelLen: maxModelLen,
		rng:         rand.New(rand.NewPCG(s, 0x5851f42d4c957f2d)),
		evalRng:     rand.New(rand.NewPCG(s, 0x6576616c75617465)),
		sysSeed:     core.Mix64(s ^ 0x73797374656d), // one system prompt for the whole fleet
		seed:        s,
	}
	if cfg.Kind == WorkloadPoisson {
		g.nextArrival = cfg.StartDelay + g.expGap()
	}
	return g
}

// outputLen draws a lognormal output length, cut at maxTokens, and stretches it by factor (1 but
// for the straggler's requests). Every request draws one number whatever its engine, so a
// straggler changes no other request's length.
func (g *Generator) outputLen(rng *rand.Rand, factor float64, maxTokens int) int {
	l := float64(g.cfg.OutputMedian) * math.Exp(g.cfg.OutputSigma*rng.NormFloat64())
	return int(min(max(math.Round(factor*l), 1), float64(maxTokens)))
}

// straggler reports whether engine is the one whose requests are stretched.
func (g *Generator) straggler(engine int) bool {
	return g.cfg.Straggler > 1 && engine == g.engines-1
}

// questionLen derives a question's length from its id, so that a repeated question is the same
// token sequence every time.
func (g *Generator) questionLen(q uint64) int {
	span := uint64(g.cfg.QuestionTokensMax - g.cfg.QuestionTokensMin + 1)
	return g.cfg.QuestionTokensMin + int(core.Mix64(q^g.seed^0x71756573)%span)
}

// spec makes the next request, for question q, arriving at engine at time at.
func (g *Generator) spec(q uint64, engine int, at time.Duration, batch int) core.RequestSpec {
	g.nextID++
	return g.makeSpec(g.nextID, g.rng, q, engine, at, batch)
}

// makeSpec makes request id for question q, arriving at engine at time at, its output length
// drawn from rng.
func (g *Generator) makeSpec(id uint64, rng *rand.Rand, q uint64, engine int, at time.Duration, batch int) core.RequestSpec {
	promptLen := g.cfg.SystemTokens + g.questionLen(q)
	factor, maxTokens := 1.0, g.cfg.MaxTokens
	if g.straggler(engine) {
		// The model length bounds prompt plus output, as vLLM's would.
		factor = g.cfg.Straggler
		maxTokens = int(min(math.Round(factor*float64(maxTokens)), float64(g.maxModelLen-promptLen)))
	}
	outputLen := g.outputLen(rng, factor, maxTokens)
	return core.RequestSpec{
		AbortAfter:   g.abortAfter(id, outputLen),
		ID:           id,
		Arrival:      at,
		SystemSeed:   g.sysSeed,
		SystemLen:    g.cfg.SystemTokens,
		QuestionSeed: core.Mix64(q ^ g.seed ^ 0x7175657374696f6e),
		PromptLen:    promptLen,
		OutputSeed:   core.Mix64(id ^ g.seed ^ 0x6f7574),
		OutputLen:    outputLen,
		MaxTokens:    maxTokens,
		Batch:        batch,
	}
}

// abortAfter is how many tokens request id generates before its client aborts it, 0 when the
// client lets it finish (see WorkloadConfig.Abort). It hashes the id, so that it takes nothing
// from the workload's generator.
func (g *Generator) abortAfter(id uint64, outputLen int) int {
	if g.cfg.Abort <= 0 || outputLen < 2 || core.Unit(core.Mix64(id^g.seed^0x61626f7274)) >= g.cfg.Abort {
		return 0
	}
	return 1 + int(core.Mix64(id^g.seed^0x6166746572)%uint64(outputLen-1))
}

// batch returns GRPO batch number n (counting from 1) arriving at time at, as a list of
// (engine, request) pairs in submission order: question by question, sample by sample.
func (g *Generator) Batch(n int, at time.Duration) []RoutedSpec {
	out := make([]RoutedSpec, 0, g.cfg.Prompts*g.cfg.Samples)
	for p := range g.cfg.Prompts {
		q := uint64(n-1)*uint64(g.cfg.Prompts) + uint64(p)
		if g.cfg.Dataset > 0 {
			q %= uint64(g.cfg.Dataset)
		}
		engine := int(q % uint64(g.engines))
		for range g.cfg.Samples {
			out = append(out, RoutedSpec{engine, g.spec(q, engine, at, n)})
		}
	}
	return out
}

// Eval questions and request ids have a high bit that training ones never reach.
const (
	evalQuestions = 1 << 63
	EvalIDs       = 1 << 62
)

// evalPrompts is the number of questions of an eval batch.
func (g *Generator) evalPrompts() int {
	if g.cfg.EvalPrompts > 0 {
		return g.cfg.EvalPrompts
	}
	return max(1, g.cfg.Prompts/4)
}

// eval returns an eval batch arriving at time at, in submission order: the held-out questions
// one by one, each sampled Samples times on one engine, the questions spread over the engines.
func (g *Generator) Eval(at time.Duration) []RoutedSpec {
	n := g.evalPrompts()
	out := make([]RoutedSpec, 0, n*g.cfg.Samples)
	for p := range n {
		q := evalQuestions | uint64(p)
		engine := p % g.engines
		for range g.cfg.Samples {
			g.nextEvalID++
			out = append(out, RoutedSpec{engine, g.makeSpec(EvalIDs+g.nextEvalID, g.evalRng, q, engine, at, 0)})
		}
	}
	return out
}

type RoutedSpec struct {
	Engine int
	Spec   core.RequestSpec
}

func (g *Generator) expGap() time.Duration {
	return time.Duration(g.rng.ExpFloat64() / g.cfg.Rate * float64(time.Second))
}

// poisson returns the next Poisson arrival if it comes at or before t.
func (g *Generator) Poisson(t time.Duration) (RoutedSpec, bool) {
	if g.nextArrival > t {
		return RoutedSpec{}, false
	}
	q := g.rng.Uint64N(uint64(g.cfg.Questions))
	engine := int(core.Mix64(q^g.seed) % uint64(g.engines))
	rs := RoutedSpec{engine, g.spec(q, engine, g.nextArrival, 0)}
	g.nextArrival += g.expGap()
	return rs, true
}
