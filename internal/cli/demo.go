package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vllmstat/vllmstat/internal/collector"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/plot"
	"github.com/vllmstat/vllmstat/internal/report"
	"github.com/vllmstat/vllmstat/internal/run"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/termline"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

const demoHelp = `Usage: vllmstat demo [flags]

Starts a simulated vLLM fleet in this process (GRPO-style rollout batches with shared prompt
prefixes, a KV cache small enough to fill up and preempt), scrapes it every 0.5 s, and ends a
step at the end of each rollout batch, the way a trainer would. Each step is printed as a row
of a table and written to OUT/steps.jsonl.

With --engine sglang the simulated servers are SGLang servers, and the table shows the keys
under the prefix sglang: the same figures where SGLang has them, read from its own families.
With --engine trtllm they are TensorRT-LLM servers (trtllm-serve's page at /prometheus/metrics),
one engine each: --dp is 1 unless set. The table shows the keys under the prefix trtllm:, with
the most requests paused at once in place of preemptions, which TensorRT-LLM does not count.

With --colocated the fleet runs a colocated RL loop: after each rollout batch (and, every
--eval-every steps, an eval batch) the engines sleep for the training time, then wake up with
the step's weights (the weights, a load of the trainer's new version, the KV cache). The demo
marks each rollout batch as phase "rollout" and each eval batch as phase "eval", and ends the
step when the engines are awake; the table shows the rollout's figures where the rest of the
step would water them down.

With --async the engines never sleep: rollout batches run one after another while the trainer
publishes a new policy version every --step-time, and each engine pauses and loads it at its
own time, one of them --lag late. The demo ends a step at each publish.

In both loops the trainer publishes a version per step, which the demo hands to vllmstat.

Flags:
`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return demoWith(ctx, args, stdout, stderr)
}

func demoWith(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vllmstat demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	steps := fs.Int("steps", 5, "number of steps (rollout batches) to run")
	servers := fs.Int("servers", 2, "simulated vLLM servers (scrape targets)")
	dp := fs.Int("dp", 2, "data-parallel engines per server")
	engine := fs.String("engine", sim.EngineVLLM, engineHelp)
	out := fs.String("out", "vllmstat-demo", "output `directory`")
	speed := fs.Float64("speed", 1, "simulated seconds per wall second")
	seed := fs.Int64("seed", 1, "workload seed: the same seed gives the same events")
	interval := fs.Float64("interval", 0.5, "scrape interval in `seconds`")
	perWorker := fs.Bool("per-worker", true, "add per-worker metrics to every step record")
	verbose := fs.Bool("v", false, "log scrape and target events")
	configPath := fs.String("config", "", "YAML config `file` for sinks, plots, timelines (its targets, interval and API are the demo's own)")
	plots := fs.Bool("plots", true, "draw per-step timeline plots (PNG) under OUT/plots")
	termTL := fs.Bool("terminal-timelines", true, "print per-worker timelines under each step's row")
	sinks := fs.String("sinks", "", "comma-separated tracker sinks to add, e.g. tensorboard,wandb")
	straggler := fs.Float64("straggler", 1, stragglerHelp)
	specDecode := fs.Int("spec-decode", 0, "speculative tokens per decode step in the simulated engines; 0 is off")
	kvConnector := fs.Bool("kv-connector", false, "give the simulated fleet a KV connector's external prefix cache")
	colocated := fs.Bool("colocated", false, colocatedHelp)
	trainTime := fs.Duration("train-time", 0, trainTimeHelp)
	evalEvery := fs.Int("eval-every", 0, evalEveryHelp)
	gpu := fs.String("gpu", "", gpuUsage)
	var lw sim.WorkloadConfig // the timing of the loops that sync weights
	loopTimingFlags(fs, &lw)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), demoHelp)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	if *steps < 1 || *servers < 1 || *dp < 1 || !(*speed > 0) || !(*interval > 0) {
		fmt.Fprintln(stderr, "vllmstat demo: --steps, --servers and --dp must be at least 1; --speed and --interval > 0")
		return exitUsage
	}
	if !(*straggler >= 1) || math.IsInf(*straggler, 0) {
		fmt.Fprintf(stderr, "vllmstat demo: --straggler must be a number of at least 1 (1 means no straggler), got %v\n", *straggler)
		return exitUsage
	}
	if *engine != sim.EngineVLLM && *engine != sim.EngineSGLang && *engine != sim.EngineTRTLLM {
		fmt.Fprintf(stderr, "vllmstat demo: --engine must be vllm, sglang or trtllm, got %q\n", *engine)
		return exitUsage
	}
	if msg := checkLoopFlags(*colocated, *trainTime, *evalEvery); msg != "" {
		fmt.Fprintln(stderr, "vllmstat demo: "+msg)
		return exitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	lw.Colocated = *colocated
	settleLoopTiming(&lw, set)
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	stderr = &lockedWriter{w: stderr}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	// The file's problems and its sinks' are told together, before the fleet starts.
	cfg := config.Default()
	var problems config.Problems
	if *configPath != "" {
		var err error
		cfg, err = config.Load(*configPath)
		var ps config.Problems
		switch {
		case errors.As(err, &ps):
			for _, p := range ps {
				problems = append(problems, *configPath+": "+p)
			}
		case err != nil:
			fmt.Fprintf(stderr, "vllmstat demo: %s: %v\n", *configPath, err)
			return exitUsage
		}
	}
	for _, name := range strings.Split(*sinks, ",") {
		if name = strings.TrimSpace(name); name != "" {
			cfg.Sinks = append(cfg.Sinks, config.SinkSpec{Type: name, Path: "--sinks"})
		}
	}
	var ps config.Problems
	if err := run.CheckSinks(cfg); errors.As(err, &ps) {
		problems = append(problems, ps...)
	} else if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "vllmstat demo: %v\n", problems)
		return exitUsage
	}
	if *engine == sim.EngineTRTLLM && !set["dp"] {
		*dp = 1 // a trtllm-serve page shows one executor
	}
	sc := sim.DefaultConfig()
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = *servers, *dp, 0, *speed, *seed
	sc.Engine = *engine
	sc.BlocksPerEngine = demoBlocks
	sc.Workload.Pause = time.Second // the trainer's update between batches; keeps the demo under a minute
	sc.Workload.Batches = *steps
	sc.Workload.Straggler = *straggler
	sc.SpecDecode = *specDecode
	sc.KVConnector = *kvConnector
	sc.MFUMetrics = true // the engines' estimated FLOPs and bytes, which --gpu makes MFU and MBU of
	if sc.Engine == sim.EngineTRTLLM {
		sc.MFUMetrics = false // trtllm-serve's page has no FLOPs or bytes counters
	}
	sc.Workload.Colocated = *colocated
	// The fleet waits at each edge of the colocated loop until the demo has marked it (its phase,
	// or its step's end), so that a machine too busy to mark it at once changes no figure.
	sc.WaitForDriver = *colocated
	sc.Workload.TrainTime = *trainTime
	sc.Workload.EvalEvery = *evalEvery
	sc.Workload.Async, sc.Workload.StepTime, sc.Workload.Lag = lw.Async, lw.StepTime, lw.Lag
	sc.Workload.LoadTime, sc.Workload.WakeTime = lw.LoadTime, lw.WakeTime
	if lw.Async {
		// Batches one after another for as long as the demo runs: its steps are the trainer's.
		sc.Workload.Pause, sc.Workload.Batches = 0, 0
	}
	if sc.KVConnector {
		// Two batches per epoch: from the third batch on, questions come back after the
		// engines' own caches have evicted them, and the external cache can serve them.
		sc.Workload.Dataset = 2 * sc.Workload.Prompts
	}
	sc.Logger = log
	if err := sc.Validate(); err != nil { // before anything is printed
		fmt.Fprintf(stderr, "vllmstat demo: invalid flags:\n  %s\n", strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return exitUsage
	}
	fleetCtx, stopFleet := context.WithCancel(ctx)
	defer stopFleet()
	fleet, err := sim.Start(fleetCtx, sc)
	if err != nil {
		fmt.Fprintf(stderr, "vllmstat demo: start the simulated fleet: %v\n", err)
		return exitError
	}
	defer fleet.Close()
	if sc.WaitForDriver {
		fleet.Resume() // it starts at once, as the other fleets do
	}

	cfg.Targets = config.TargetsOf(fleet.URLs())
	cfg.Interval = *interval
	cfg.StepEvery = 0
	if set["out"] || *configPath == "" {
		cfg.OutDir = *out
	}
	if set["per-worker"] || *configPath == "" {
		cfg.PerWorker = *perWorker
	}
	if set["gpu"] {
		cfg.GPU = *gpu
		cfg.SetPath("gpu", "--gpu")
	}
	cfg.Listen = ""
	cfg.Record = ""
	if set["plots"] || *configPath == "" {
		cfg.TimelinePlots = *plots
	}
	if set["terminal-timelines"] || *configPath == "" {
		cfg.TerminalTimelines = *termTL
	}
	cfg.RecordTimelines = true // the report's step picker shows them
	// The fleet is on loopback: a slow answer only means a busy machine, so wait for it rather
	// than count a failed scrape.
	cfg.ScrapeTimeout = max(cfg.Timeout(), 2*time.Second)
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "vllmstat demo: %v\n", err)
		return exitError
	}
	kind, unit := vllm.VLLM, "engine"
	if sc.Engine == sim.EngineTRTLLM {
		kind = vllm.TRTLLM
		fmt.Fprintf(stdout, "Simulated TensorRT-LLM fleet: %d servers (trtllm-serve pages, keys under %s/)\n", sc.Servers,
			vllm.EnginePrefix(cfg.MetricPrefix, kind))
	} else if sc.Engine == sim.EngineSGLang {
		kind, unit = vllm.SGLang, "DP rank"
		fmt.Fprintf(stdout, "Simulated SGLang fleet: %d servers x %d DP ranks (SGLang pages, keys under %s/)\n", *servers, *dp,
			vllm.EnginePrefix(cfg.MetricPrefix, kind))
	} else {
		fmt.Fprintf(stdout, "Simulated vLLM fleet: %d servers x %d engines (vLLM %s pages)\n", *servers, *dp, sc.Version)
	}
	for _, u := range cfg.Targets {
		fmt.Fprintf(stdout, "  %s\n", u)
	}
	if *straggler > 1 {
		fmt.Fprintf(stdout, "Straggler: %s %d of %s generates %g times longer outputs.\n", unit, *dp-1, cfg.Targets[len(cfg.Targets)-1], *straggler)
	}
	table := newStepTable(stdout, cfg.MetricPrefix)
	table.kind = kind
	if *colocated {
		train := "as long as its rollout"
		if *trainTime > 0 {
			train = trainTime.String()
		}
		fmt.Fprintf(stdout, "Colocated loop: after each step's batches the engines sleep for the training time (%s, simulated)", train)
		if *evalEvery > 0 {
			fmt.Fprintf(stdout, "; an eval batch after the rollout every %d steps", *evalEvery)
		}
		fmt.Fprintln(stdout, ".")
		fmt.Fprintf(stdout, "Then they wake up: the weights (%s), a load of the trainer's new version (%s), the KV cache (%s).\n",
			lw.WakeTime, lw.LoadTime, lw.WakeTime)
		fmt.Fprintf(stdout, "Scraping every %gs; a step ends when the engines are awake after the training time.\n", cfg.Interval)
		table.phase = phaseRollout
		fmt.Fprintln(stdout, table.legend())
		fmt.Fprintln(stdout)
	} else if lw.Async {
		fmt.Fprintf(stdout, "Async loop: the trainer publishes a new policy version every %s (simulated); each engine pauses and loads it (%s) at its own time",
			lw.StepTime, lw.LoadTime)
		if srv, eng, ok := fleet.Laggard(); ok {
			fmt.Fprintf(stdout, ", %s %d of %s %s late", unit, eng, cfg.Targets[srv], lw.Lag)
		}
		fmt.Fprintln(stdout, ".")
		fmt.Fprintf(stdout, "Scraping every %gs; a step ends at each publish.\n\n", cfg.Interval)
	} else {
		fmt.Fprintf(stdout, "Scraping every %gs; a step ends when a rollout batch has finished on every engine.\n\n", cfg.Interval)
	}
	switch {
	case sc.SpecDecode > 0 && kind == vllm.SGLang:
		table.cols = append(table.cols, sglangSpecDecodeCol)
	case sc.SpecDecode > 0:
		table.cols = append(table.cols, specDecodeCol)
	}
	if kind == vllm.TRTLLM {
		// TensorRT-LLM's page counts no preemptions: its nearest figure is the requests paused.
		i := slices.IndexFunc(table.cols, func(c tableCol) bool { return c.key == keyPreemptions })
		table.cols[i] = pausedCol
	}
	if sc.KVConnector && kind == vllm.VLLM { // SGLang counts the external cache's hits as cached tokens
		table.cols = append(table.cols, kvConnectorCol)
	}
	if cfg.Peak().TFLOPS > 0 {
		table.cols = append(table.cols, mfuCol)
	}
	// A demo starts steps.jsonl anew, and ends every step itself.
	p := run.New(cfg, run.Options{Logger: log, Fresh: true, NoFinalStep: true})
	if err := p.Start(context.Background()); err != nil {
		fmt.Fprintf(stderr, "vllmstat demo: %v\n", err)
		var ps config.Problems
		if errors.As(err, &ps) {
			return exitUsage
		}
		return exitError
	}
	c := p.Collector()

	// A straggler's longer outputs make its batches that much longer. Past a factor of 64 every
	// straggler request is cut at the model length anyway. The colocated loop's longest wait is
	// the training time.
	batchTimeout := time.Duration(float64(2*time.Minute) * min(*straggler, 64))
	batchTimeout += time.Duration(float64(*trainTime+2*lw.WakeTime+lw.LoadTime+lw.StepTime) / *speed)
	code := exitOK
	fail := func(format string, args ...any) {
		fmt.Fprintf(stderr, "vllmstat demo: "+format+"\n", args...)
		code = exitError
	}
	// endStep ends step n and prints its row; false if it failed.
	endStep := func(n int) bool {
		rec, err := c.EndStep(ctx, int64(n))
		if err != nil {
			fail("end step %d: %v", n, err)
			return false
		}
		table.row(&rec)
		if cfg.TerminalTimelines {
			fmt.Fprintln(stdout)
			termline.Write(stdout, &rec, termline.Options{Width: termWidth(stdout)})
			fmt.Fprintln(stdout)
			table.rows = 0 // repeat the header above the next row
		}
		return true
	}
	// In the colocated loop the edges mark the phases and end the steps, in the async loop the
	// publishes end them; otherwise the end of each rollout batch ends a step.
	batches, edges, publishes := fleet.Batches(), fleet.Edges(), fleet.Publishes()
	if edges != nil || lw.Async {
		batches = nil
	}
	for done := 0; done < *steps; {
		select {
		case n := <-batches:
			if !endStep(n) {
				done = *steps
				break
			}
			done++
		case e := <-edges:
			if e.Kind == sim.Wake {
				if !endStep(e.Step) {
					done = *steps
					break
				}
				done++
				fleet.Resume()
				break
			}
			if err := markPhase(ctx, c, e.Kind); err != nil {
				fail("step %d: %v", e.Step, err)
				done = *steps
			}
			fleet.Resume()
		case p := <-publishes:
			if err := publishPolicy(ctx, c, log, p); err != nil {
				fail("%v", err)
				done = *steps
				break
			}
			if lw.Async && p.Version > 0 { // version k ends step k
				if !endStep(p.Version) {
					done = *steps
					break
				}
				done++
			}
		case <-ctx.Done():
			done = *steps
		case <-time.After(batchTimeout):
			if edges != nil {
				fail("the colocated loop went on to no next batch or step in %s", batchTimeout)
			} else if lw.Async {
				fail("the trainer published no new version in %s", batchTimeout)
			} else {
				fail("no rollout batch finished in %s", batchTimeout)
			}
			done = *steps
		}
	}
	if err := p.Stop(context.Background()); err != nil {
		fmt.Fprintf(stderr, "vllmstat demo: %v\n", err)
		code = exitError
	}
	fmt.Fprintf(stdout, "\nSteps written to %s\n", filepath.Join(cfg.OutDir, "steps.jsonl"))
	if cfg.TimelinePlots {
		fmt.Fprintf(stdout, "Timeline plots in %s\n", filepath.Join(cfg.OutDir, plot.Dir))
	}
	rep := filepath.Join(cfg.OutDir, "report.html")
	if err := report.WriteFile(rep, cfg.OutDir, report.Options{}); err != nil {
		fmt.Fprintf(stderr, "vllmstat demo: write the report: %v\n", err)
		code = exitError
	} else {
		fmt.Fprintf(stdout, "Report: %s (open it in a browser)\n", rep)
	}
	return code
}

// The phases the demo marks in the colocated loop.
const (
	phaseRollout = "rollout"
	phaseEval    = "eval"
)

// phaseCalls are the collector's calls that mark phases.
type phaseCalls interface {
	StartPhase(ctx context.Context, name string) (collector.PhaseEdge, error)
	EndPhase(ctx context.Context, name string) (collector.PhaseEdge, error)
}

// markPhase marks the phase edge that a colocated loop's edge is: a batch's start starts its
// phase, its end ends it. Sleep is no phase edge.
func markPhase(ctx context.Context, c phaseCalls, k sim.LoopEdgeKind) error {
	var err error
	switch k {
	case sim.RolloutStart:
		_, err = c.StartPhase(ctx, phaseRollout)
	case sim.RolloutEnd:
		_, err = c.EndPhase(ctx, phaseRollout)
	case sim.EvalStart:
		_, err = c.StartPhase(ctx, phaseEval)
	case sim.EvalEnd:
		_, err = c.EndPhase(ctx, phaseEval)
	}
	if err != nil {
		return fmt.Errorf("mark %s: %w", k, err)
	}
	return nil
}

// publishPolicy hands the trainer's publish of a new policy version to vllmstat, as a trainer's
// set_policy_version does.
func publishPolicy(ctx context.Context, c interface {
	Publish(ctx context.Context, v int64, name string) (collector.PolicyVersion, error)
}, log *slog.Logger, p sim.Publish) error {
	log.Info("publish policy", "version", p.Version, "sim_time", p.At)
	if _, err := c.Publish(ctx, int64(p.Version), ""); err != nil {
		return fmt.Errorf("publish policy version %d: %w", p.Version, err)
	}
	return nil
}

// checkLoopFlags checks the colocated loop's flags, returning the problem or "".
func checkLoopFlags(colocated bool, trainTime time.Duration, evalEvery int) string {
	switch {
	case trainTime < 0 || evalEvery < 0:
		return fmt.Sprintf("--train-time and --eval-every must not be negative, got %s and %d", trainTime, evalEvery)
	case !colocated && (trainTime != 0 || evalEvery != 0):
		return "--train-time and --eval-every need --colocated: the engines sleep for the training time, and eval batches run before it"
	}
	return ""
}

// stepTable prints closed steps as the rows of an aligned table, each followed by its ledger
// line (see ledgerLine).
type stepTable struct {
	w      io.Writer
	prefix string
	kind   vllm.Engine // the engine kind whose keys the columns show
	rows   int
	cols   []tableCol
	// phase, if set, names a phase whose figures the columns marked fromPhase show in the rows
	// of steps that have it, and adds a column of its duration after the step's.
	phase string
}

func newStepTable(w io.Writer, prefix string) *stepTable {
	return &stepTable{w: w, prefix: prefix, cols: slices.Clone(tableCols)}
}

type tableCol struct {
	head   string
	key    vllm.Value // its key under the run's prefix gives the column's number
	format string
	scale  float64
	// fromPhase marks the figures that the time outside the table's phase would water down:
	// rates and time means.
	fromPhase bool
}

// specDecodeCol is the column a demo with speculative decoding adds.
var specDecodeCol = tableCol{"accept", vllm.Value{Name: vllm.SpecAcceptanceRate.Name}, "%6.1f%%", 100, false}

// sglangSpecDecodeCol is specDecodeCol of an SGLang fleet, which has the rate as a gauge only.
var sglangSpecDecodeCol = tableCol{"accept", vllm.Value{Name: vllm.Gauges[vllm.SpecAcceptRate].Name, Stat: vllm.StatMean}, "%6.1f%%", 100, false}

// pausedCol takes the place of the preemptions column on a TensorRT-LLM fleet, whose page has
// no preemption counter: the most requests the capacity scheduler held paused at once.
var pausedCol = tableCol{"paused", keyPausedMax, "%7.0f", 1, false}

// kvConnectorCol is the column a demo with a KV connector adds.
var kvConnectorCol = tableCol{"ext hit", vllm.Value{Name: vllm.ExternalHitRate.Name}, "%7.1f%%", 100, false}

// mfuCol is the column a demo with a GPU's peak (--gpu) adds: the achieved TFLOP/s per GPU
// over the peak, in the table's phase when it has one (time outside it waters the rate down).
var mfuCol = tableCol{"mfu", vllm.Value{Name: step.NameMFU}, "%5.1f%%", 100, true}

var tableCols = []tableCol{
	{"hit rate", keyHitRate, "%7.1f%%", 100, false},
	{"preempt", keyPreemptions, "%7.0f", 1, false},
	{"kv mean", keyKVMean, "%7.2f", 1, true},
	{"kv max", keyKVMax, "%7.2f", 1, false},
	{"run mean", keyRunMean, "%8.1f", 1, true},
	{"run max", keyRunMax, "%7.0f", 1, false},
	{"wait mean", keyWaitMean, "%9.1f", 1, true},
	{"wait max", keyWaitMax, "%8.0f", 1, false},
	{"gen tok/s", keyGenPerS, "%9.0f", 1, true},
	{"ttft p50", keyTTFTP50, "%7.3fs", 1, false},
	{"ttft p95", keyTTFTP95, "%7.3fs", 1, false},
	{"tail s", keyTail, "%6.1f", 1, false}, // the step's, as the straggler beside it
}

// phaseSecsHead heads the column of the phase's duration.
const phaseSecsHead = "roll s"

// legend says which columns show the table's phase.
func (t *stepTable) legend() string {
	var heads []string
	for _, c := range t.cols {
		if c.fromPhase {
			heads = append(heads, c.head)
		}
	}
	return fmt.Sprintf("Columns %s show each step's %s phase; %s is its duration.", strings.Join(heads, ", "), t.phase, phaseSecsHead)
}

func (t *stepTable) row(r *step.Record) {
	if t.rows == 0 {
		fmt.Fprintf(t.w, "%4s %6s", "step", "secs")
		if t.phase != "" {
			fmt.Fprintf(t.w, " %6s", phaseSecsHead)
		}
		fmt.Fprintf(t.w, " %7s", "workers")
		for _, c := range t.cols {
			fmt.Fprintf(t.w, " %*s", len(fmt.Sprintf(c.format, 0.0)), c.head)
		}
		fmt.Fprintln(t.w, " straggler")
	}
	t.rows++
	var ph *step.Phase
	if t.phase != "" {
		ph = r.Phases[t.phase]
	}
	fmt.Fprintf(t.w, "%4d %6.1f", r.Step, r.DurationS)
	switch {
	case ph != nil:
		fmt.Fprintf(t.w, " %6.1f", ph.DurationS)
	case t.phase != "":
		fmt.Fprintf(t.w, " %6s", "-")
	}
	fmt.Fprintf(t.w, " %7d", r.Workers)
	for _, c := range t.cols {
		width := len(fmt.Sprintf(c.format, 0.0))
		m := r.Metrics
		if c.fromPhase && ph != nil {
			m = ph.Metrics
		}
		key := c.key
		key.Kind = t.kind
		v, ok := m[key.Key(t.prefix)]
		if !ok {
			fmt.Fprintf(t.w, " %*s", width, "-")
			continue
		}
		fmt.Fprintf(t.w, " "+c.format, v*c.scale)
	}
	// The latest straggler, and how many more, in a last column of free width.
	fmt.Fprintln(t.w, " "+cmp.Or(stragglerName(r), "-"))
	// Where the whole step's engine-seconds went, under its row from the secs column on: one
	// line, since a column per state would widen a table already wider than most terminals.
	if l := ledgerLine(r.Metrics, t.prefix, t.kind); l != "" {
		fmt.Fprintf(t.w, "%4s %s\n", "", l)
	}
}

// demoBlocks sizes each simulated engine's KV cache so that every rollout batch fills it and
// preempts some requests (the simulator's default leaves some batches without preemptions).
const demoBlocks = 640
