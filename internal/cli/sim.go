package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim"
)

// faultFlags collects repeated --fault flags.
type faultFlags []sim.Fault

func (f *faultFlags) String() string {
	s := make([]string, len(*f))
	for i, x := range *f {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

func (f *faultFlags) Set(v string) error {
	x, err := sim.ParseFault(v)
	if err != nil {
		return err
	}
	*f = append(*f, x)
	return nil
}

const simUsage = `Usage: vllmstat sim [flags]

Start a simulated fleet of vLLM API servers. Each server serves a /metrics page laid out exactly
as vLLM's (families, HELP texts, labels, buckets, number formatting), whose values come from a
model of vLLM's scheduler: KV cache with prefix caching, running batch, waiting queue,
preemption. The simulator prints one /metrics URL per line and runs until interrupted.

With --engine sglang the servers are SGLang servers started with --enable-metrics: the same
model behind pages laid out as SGLang's (sglang: families, a scheduler's series per DP rank
labelled dp_rank, the tokenizer's without it). Their gauges change only at SGLang's log points
(every prefill batch, every --decode-log-interval decode batches, every 30s while idle), a
preemption is a retraction, and tokens are counted as requests finish. With --router an SGLang
router listens on port --port + --servers: its /engine_metrics merges every server's page, each
sample labelled worker_addr; its URL is printed after the servers'. With --priority the servers
run SGLang's priority scheduling: the running and queue gauges come per priority too.

With --engine trtllm the servers are trtllm-serve servers run with return_perf_metrics and
iteration statistics on: one engine each (--dp 1), its page at /prometheus/metrics (the URL
printed), laid out as prometheus_client's multiprocess collector prints TensorRT-LLM's trtllm_
families. A request's tokens, finish reason and latencies are logged when it finishes, and the
gauges are the iteration statistics of the last iteration a request finished in.

With --api-server-count N above 1 each vLLM server runs N API server processes, as vllm serve
--api-server-count does: its page is prometheus_client's multiprocess page, with no _created
samples and no process or Python families, counters and histograms summed over the processes,
and a scheduler gauge of an engine missing until the engine's first iteration (vLLM's gauges are
"mostrecent"). vLLM 0.20 pages, outside the colocated and async loops.

Server i listens on port --port + i. Simulated time runs --speed times faster than the wall
clock; fault times are wall-clock offsets from the start.

With --colocated the grpo workload is a colocated synchronous RL loop: after each rollout batch
(and, every --eval-every steps, an eval batch) the engines sleep for --train-time, their pages
showing vllm:engine_sleep_state (0.20 pages) with no load and an empty KV cache, then wake up
with the step's weights: the weights come back (--wake-time), the engines load the trainer's new
version into them (--load-time), then the KV cache comes back (--wake-time); the next rollout
starts --pause after the wake-up. The first rollout waits for a load of the initial version.

With --async the engines never sleep: the workload runs on (grpo batches one after another,
with --pause 0 unless set) while the trainer publishes a new policy version every --step-time,
and each engine pauses and loads it (--load-time) at its own time, one of them --lag late, so
that it generates on stale weights that much longer.

Both loops run the servers as vLLM's dev mode does: 0.20 pages show the sleep resource state,
engine_fully_awake and the rl_weight_update families, and GET /weight_info answers the server's
weight version (its engines' lowest, null before the first load). SGLang servers answer GET
/model_info with their weight_version, and their pages show num_paused_reqs while a sync holds
requests and weight_load_duration_seconds after each load.

With --workload none the servers run no workload of their own: clients drive them as they drive
vLLM (or SGLang), on the wall clock times --speed. POST /v1/completions and /v1/chat/completions
(n, max_tokens, ignore_eos, stream) run each request on one engine of the server (its samples
together), answered when it finishes, with usage equal to what the page's counters gained; the
prompt is one token per whitespace-separated word. vLLM servers answer POST /sleep?level=N,
/wake_up (--wake-time for the weights, then for the KV cache), GET /is_sleeping, POST /pause,
/resume, GET /is_paused, POST /start_weight_update, /update_weights and /finish_weight_update
(the load lasts --load-time from its start), /update_weight_version and GET /weight_info; SGLang
servers POST /generate, /release_memory_occupation, /resume_memory_occupation (--wake-time
twice), /update_weights_from_disk (--load-time), /pause_generation, /continue_generation,
/update_weight_version and GET /model_info; TensorRT-LLM servers POST /release_memory and
/resume_memory (--wake-time twice). Each call is answered once its wake-up or load is over. See
docs/simulator.md.

Faults (--fault, repeatable): KIND@TIME[+DURATION][:server=N]
  restart@30s         the server restarts: counters reset, new _created, caches and requests lost
  down@30s+10s        the port refuses connections for 10s, then comes back
  slow@30s+10s        /metrics answers only after --slow-delay during the window
  garbage@30s         one /metrics answer is an HTML error page with status 200
  N is a 0-based server index; without :server=N the fault hits every server.

Flags:
`

// engineHelp documents --engine for sim and demo alike.
const engineHelp = "inference engine whose pages the servers serve: vllm, sglang or trtllm"

// stragglerHelp documents --straggler for sim and demo alike.
const stragglerHelp = "make the last engine of the last server a straggler: its requests generate `F` times longer outputs " +
	"(and ask for F times max_tokens, cut at the model length); 1 means none"

// The help of the colocated loop's flags, for sim and demo alike.
const (
	colocatedHelp = "run a colocated RL loop: after each batch the engines sleep (vLLM's LLM.sleep(), level 1) " +
		"for the training time, then wake for the next batch"
	trainTimeHelp = "colocated: simulated training time the engines sleep after each step's batches; 0 means as long as the step's rollout batch"
	evalEveryHelp = "colocated: every `N` steps, run a smaller eval batch after the rollout batch, before the training time; 0 runs none"
	asyncHelp     = "run an async RL loop: the engines never sleep; the trainer publishes a new policy version every step time, " +
		"and each engine pauses and loads it at its own time, one of them late by the lag"
	stepTimeHelp = "async: simulated time between two of the trainer's publishes"
	lagHelp      = "async: how much later than its own time the lagging engine syncs each version (simulated)"
	loadTimeHelp = "colocated, async, workload none: simulated time a weight load takes"
	wakeTimeHelp = "colocated, workload none: simulated time each half of a wake-up takes: the weights', then, after the load, the KV cache's"
)

// The defaults of the loops' timing flags; each applies only to its loops.
const (
	defaultStepTime = 10 * time.Second
	defaultLag      = 3 * time.Second
	defaultLoadTime = 2 * time.Second
	defaultWakeTime = time.Second
)

// loopTimingFlags adds the flags of the loops that sync weights to fs, writing into w.
func loopTimingFlags(fs *flag.FlagSet, w *sim.WorkloadConfig) {
	fs.BoolVar(&w.Async, "async", w.Async, asyncHelp)
	fs.DurationVar(&w.StepTime, "step-time", defaultStepTime, stepTimeHelp)
	fs.DurationVar(&w.Lag, "lag", defaultLag, lagHelp)
	fs.DurationVar(&w.LoadTime, "load-time", defaultLoadTime, loadTimeHelp)
	fs.DurationVar(&w.WakeTime, "wake-time", defaultWakeTime, wakeTimeHelp)
}

// settleLoopTiming drops the defaults of the timing flags whose loop is off; the ones set on the
// command line stay, for the workload's validation to refuse.
func settleLoopTiming(w *sim.WorkloadConfig, set map[string]bool) {
	if !w.Async {
		if !set["step-time"] {
			w.StepTime = 0
		}
		if !set["lag"] {
			w.Lag = 0
		}
	}
	if !w.Colocated && w.Kind != sim.WorkloadNone && !set["wake-time"] {
		w.WakeTime = 0
	}
	if !w.Async && !w.Colocated && w.Kind != sim.WorkloadNone && !set["load-time"] {
		w.LoadTime = 0
	}
}

// runSim is `vllmstat sim`.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runSimContext(ctx, args, stdout, stderr)
}

func runSimContext(parent context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := sim.DefaultConfig()
	w := &cfg.Workload
	fs := flag.NewFlagSet("vllmstat sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), simUsage)
		fs.PrintDefaults()
	}
	fs.IntVar(&cfg.Servers, "servers", cfg.Servers, "number of API servers (scrape targets)")
	fs.IntVar(&cfg.DP, "dp", cfg.DP, "data-parallel engines per server (the engine label)")
	fs.IntVar(&cfg.Port, "port", cfg.Port, "port of server 0; server i uses port+i; 0 picks free ports")
	fs.StringVar(&cfg.Host, "host", cfg.Host, "address to listen on")
	fs.StringVar(&cfg.Engine, "engine", cfg.Engine, engineHelp)
	fs.StringVar(&cfg.Version, "vllm-version", cfg.Version, "vLLM page layout: 0.20, 0.10 or 0.8")
	fs.IntVar(&cfg.APIServerCount, "api-server-count", cfg.APIServerCount, "vLLM's --api-server-count: above 1, pages are prometheus_client's multiprocess page (0.20 only)")
	fs.BoolVar(&cfg.Router, "router", cfg.Router, "sglang: run SGLang's router on port --port + --servers: /engine_metrics merges every server's page, /generate and /v1/* go to the servers by --router-policy, /metrics is the router's own")
	fs.StringVar(&cfg.RouterPolicy, "router-policy", cfg.RouterPolicy, "sglang: the router's --policy: round_robin or cache_aware")
	fs.BoolVar(&cfg.Priority, "priority", cfg.Priority, "sglang: SGLang's --enable-priority-scheduling: running and queue gauges per priority beside their totals")
	fs.IntVar(&cfg.DecodeLogInterval, "decode-log-interval", cfg.DecodeLogInterval, "sglang: decode batches between two of the scheduler's log points (SGLang's --decode-log-interval)")
	fs.StringVar(&cfg.VersionTag, "version-tag", cfg.VersionTag, `answer weight versions as strings, as vLLM and SGLang keep them: "default" before the first load, then this tag and the number (such as step-3)`)
	fs.BoolVar(&cfg.SGLangEagerGauges, "sglang-eager-gauges", cfg.SGLangEagerGauges, "sglang: set the scheduler's gauges after every iteration and when it goes idle, not at SGLang's log points only")
	fs.BoolVar(&cfg.SGLangStageMetrics, "sglang-stage-metrics", cfg.SGLangStageMetrics, "sglang: serve scheduler_stage_seconds_total{category} and scheduler_idle_seconds_total, counted from the engine's own clock")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the workload; the same seed gives the same events")
	fs.Float64Var(&cfg.Speed, "speed", cfg.Speed, "simulated seconds per wall second")
	fs.StringVar(&cfg.Model, "model", cfg.Model, "served model name (model_name label)")
	fs.StringVar(&w.Kind, "workload", w.Kind, "workload: grpo (rollout batches), poisson (steady serving) or none (only the requests and calls clients send, see above)")
	fs.IntVar(&w.Prompts, "prompts", w.Prompts, "grpo: prompts per batch")
	fs.IntVar(&w.Samples, "samples", w.Samples, "grpo: samples per prompt (all on one engine)")
	fs.IntVar(&w.Dataset, "dataset", w.Dataset, "grpo: distinct questions the batches cycle through, epoch after epoch; 0 never repeats one")
	fs.IntVar(&w.Batches, "batches", w.Batches, "grpo: stop after this many batches; 0 runs forever")
	fs.DurationVar(&w.Pause, "pause", w.Pause, "grpo: simulated pause between batches (the trainer's update; 0 with --async unless set); colocated: from the wake-up to the next rollout")
	fs.DurationVar(&w.StartDelay, "start-delay", w.StartDelay, "simulated time before the first request")
	fs.Float64Var(&w.Rate, "rate", w.Rate, "poisson: requests per simulated second, fleet-wide")
	fs.IntVar(&w.Questions, "questions", w.Questions, "poisson: distinct questions requests draw from")
	fs.IntVar(&w.SystemTokens, "system-tokens", w.SystemTokens, "length of the system prompt all requests share")
	fs.IntVar(&w.QuestionTokensMin, "question-tokens-min", w.QuestionTokensMin, "shortest question, in tokens")
	fs.IntVar(&w.QuestionTokensMax, "question-tokens-max", w.QuestionTokensMax, "longest question, in tokens")
	fs.IntVar(&w.OutputMedian, "output-median", w.OutputMedian, "median output length, in tokens (lognormal)")
	fs.Float64Var(&w.OutputSigma, "output-sigma", w.OutputSigma, "sigma of the lognormal output length")
	fs.IntVar(&w.MaxTokens, "max-tokens", w.MaxTokens, "max_tokens of every request; longer outputs finish with reason length")
	fs.Float64Var(&w.Straggler, "straggler", w.Straggler, stragglerHelp)
	fs.Float64Var(&w.Abort, "abort", w.Abort, "share (0 to 1) of the requests their client aborts partway through their output, "+
		"as a trainer's partial rollouts do; vLLM pages count them in prompt_tokens and generation_tokens only, SGLang's in num_aborted_requests too")
	fs.BoolVar(&w.Colocated, "colocated", w.Colocated, colocatedHelp)
	fs.DurationVar(&w.TrainTime, "train-time", w.TrainTime, trainTimeHelp)
	fs.IntVar(&w.EvalEvery, "eval-every", w.EvalEvery, evalEveryHelp)
	fs.IntVar(&w.EvalPrompts, "eval-prompts", w.EvalPrompts, "colocated: held-out questions per eval batch, each sampled --samples times; 0 means a quarter of --prompts")
	loopTimingFlags(fs, w)
	fs.IntVar(&cfg.BlocksPerEngine, "blocks", cfg.BlocksPerEngine, "KV-cache blocks of 16 tokens per engine")
	fs.IntVar(&cfg.MaxNumSeqs, "max-num-seqs", cfg.MaxNumSeqs, "cap on each engine's running batch")
	fs.IntVar(&cfg.MaxNumBatchedTokens, "max-num-batched-tokens", cfg.MaxNumBatchedTokens, "token budget of one engine iteration")
	fs.BoolVar(&cfg.KVConnector, "kv-connector", cfg.KVConnector, "give the fleet a KV connector's external prefix cache, shared by all engines, that serves part of their prefix-cache misses")
	fs.IntVar(&cfg.SpecDecode, "spec-decode", cfg.SpecDecode, "speculative tokens per decode step (vLLM's num_speculative_tokens); 0 is off")
	fs.IntVar(&cfg.MaxModelLen, "max-model-len", cfg.MaxModelLen, "longest request in tokens; sets token histogram buckets")
	fs.BoolVar(&cfg.MFUMetrics, "mfu-metrics", cfg.MFUMetrics, "vllm 0.20: serve the estimated FLOPs and bytes read and written per GPU (vLLM's --enable-mfu-metrics) of a model of --model-params parameters in BF16")
	fs.Float64Var(&cfg.Compute.Params, "model-params", cfg.Compute.Params, "parameters of the model the MFU counters estimate the work of")
	fs.BoolVar(&cfg.KVCacheMetrics, "kv-cache-metrics", cfg.KVCacheMetrics, "vllm 0.20: serve the KV block residency histograms (vLLM's --kv-cache-metrics), every block sampled")
	fs.DurationVar(&cfg.SlowDelay, "slow-delay", cfg.SlowDelay, "how late /metrics answers during a slow fault")
	var faults faultFlags
	fs.Var(&faults, "fault", "fault to inject, KIND@TIME[+DURATION][:server=N] (repeatable, see above)")
	logLevel := fs.String("log-level", "info", "log level on stderr: debug, info, warn or error")

	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vllmstat sim: unexpected argument %q (all settings are flags; see -h)\n", fs.Arg(0))
		return exitUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "vllmstat sim: invalid value %q for flag -log-level: want debug, info, warn or error\n", *logLevel)
		return exitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	settleLoopTiming(w, set)
	if w.Async && !set["pause"] {
		w.Pause = 0 // the async loop's engines generate continuously
	}
	cfg.Faults = faults
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "vllmstat sim: invalid flags:\n  %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return exitUsage
	}

	ctx := parent // Run ends it on SIGINT/SIGTERM
	fleet, err := sim.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "vllmstat sim: %v\n", err)
		return exitError
	}
	for _, u := range fleet.URLs() {
		fmt.Fprintln(stdout, u)
	}
	if u := fleet.RouterURL(); u != "" {
		fmt.Fprintln(stdout, u)
	}
	<-ctx.Done()
	cfg.Logger.Info("shutting down")
	done := make(chan struct{})
	go func() {
		fleet.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		fmt.Fprintln(stderr, "vllmstat sim: shutdown took too long")
		return exitError
	}
	return exitOK
}
