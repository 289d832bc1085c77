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

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/plot"
	"github.com/vllmstat/vllmstat/internal/report"
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
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	stderr = &lockedWriter{w: stderr}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	cfg := config.Default()
	if *configPath != "" {
		var err error
		if cfg, err = config.Load(*configPath); err != nil {
			fmt.Fprintf(stderr, "vllmstat demo: %s: %v\n", *configPath, err)
			return exitUsage
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range strings.Split(*sinks, ",") {
		if name = strings.TrimSpace(name); name != "" {
			cfg.Sinks = append(cfg.Sinks, config.SinkSpec{Type: name, Path: "--sinks"})
		}
	}
	if _, err := parseSinks(cfg, log); err != nil { // before the fleet starts; run builds them
		fmt.Fprintf(stderr, "vllmstat demo: %v\n", err)
		return exitUsage
	}
	sc := sim.DefaultConfig()
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = *servers, *dp, 0, *speed, *seed
	sc.BlocksPerEngine = demoBlocks
	sc.Workload.Pause = time.Second // the trainer's update between batches; keeps the demo under a minute
	sc.Workload.Batches = *steps
	sc.Workload.Straggler = *straggler
	sc.SpecDecode = *specDecode
	sc.KVConnector = *kvConnector
	if sc.KVConnector {
		// Two batches per epoch: from the third batch on, questions come back after the
		// engines' own caches have evicted them, and the external cache can serve them.
		sc.Workload.Dataset = 2 * sc.Workload.Prompts
	}
	sc.Logger = log
	fleetCtx, stopFleet := context.WithCancel(ctx)
	defer stopFleet()
	fleet, err := sim.Start(fleetCtx, sc)
	if err != nil {
		fmt.Fprintf(stderr, "vllmstat demo: start the simulated fleet: %v\n", err)
		return exitError
	}
	defer fleet.Close()

	cfg.Targets = config.TargetsOf(fleet.URLs())
	cfg.Interval = *interval
	cfg.StepEvery = 0
	if set["out"] || *configPath == "" {
		cfg.OutDir = *out
	}
	if set["per-worker"] || *configPath == "" {
		cfg.PerWorker = *perWorker
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
	fmt.Fprintf(stdout, "Simulated vLLM fleet: %d servers x %d engines (vLLM %s pages)\n", *servers, *dp, sc.Version)
	for _, u := range cfg.Targets {
		fmt.Fprintf(stdout, "  %s\n", u)
	}
	if *straggler > 1 {
		fmt.Fprintf(stdout, "Straggler: engine %d of %s generates %g times longer outputs.\n", *dp-1, cfg.Targets[len(cfg.Targets)-1], *straggler)
	}
	fmt.Fprintf(stdout, "Scraping every %gs; a step ends when a rollout batch has finished on every engine.\n\n", cfg.Interval)
	table := newStepTable(stdout, cfg.MetricPrefix)
	if sc.SpecDecode > 0 {
		table.cols = append(table.cols, specDecodeCol)
	}
	if sc.KVConnector {
		table.cols = append(table.cols, kvConnectorCol)
	}
	r, err := startRun(cfg, log, io.Discard, true) // a demo starts steps.jsonl anew
	if err != nil {
		fmt.Fprintf(stderr, "vllmstat demo: %v\n", err)
		var ps config.Problems
		if errors.As(err, &ps) {
			return exitUsage
		}
		return exitError
	}
	r.c.SetNoFinalStep()
	runCtx, stopRun := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- r.run(runCtx) }()

	// A straggler's longer outputs make its batches that much longer. Past a factor of 64 every
	// straggler request is cut at the model length anyway.
	batchTimeout := time.Duration(float64(2*time.Minute) * min(*straggler, 64))
	code := exitOK
	for done := 0; done < *steps; {
		select {
		case n, ok := <-fleet.Batches():
			if !ok {
				done = *steps
				break
			}
			rec, err := r.c.EndStep(ctx, int64(n))
			if err != nil {
				fmt.Fprintf(stderr, "vllmstat demo: end step %d: %v\n", n, err)
				code = exitError
				done = *steps
				break
			}
			table.row(&rec)
			if cfg.TerminalTimelines {
				fmt.Fprintln(stdout)
				termline.Write(stdout, &rec, termline.Options{Width: termWidth(stdout)})
				fmt.Fprintln(stdout)
				table.rows = 0 // repeat the header above the next row
			}
			done++
		case <-ctx.Done():
			done = *steps
		case <-time.After(batchTimeout):
			fmt.Fprintf(stderr, "vllmstat demo: no rollout batch finished in %s\n", batchTimeout)
			code = exitError
			done = *steps
		}
	}
	stopRun()
	if err := <-runErr; err != nil {
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

// stepTable prints closed steps as the rows of an aligned table.
type stepTable struct {
	w      io.Writer
	prefix string
	rows   int
	cols   []tableCol
}

func newStepTable(w io.Writer, prefix string) *stepTable {
	return &stepTable{w: w, prefix: prefix, cols: slices.Clip(tableCols)}
}

type tableCol struct {
	head   string
	key    vllm.Value // its key under the run's prefix gives the column's number
	format string
	scale  float64
}

// specDecodeCol is the column a demo with speculative decoding adds.
var specDecodeCol = tableCol{"accept", vllm.Value{Name: vllm.SpecAcceptanceRate.Name}, "%6.1f%%", 100}

// kvConnectorCol is the column a demo with a KV connector adds.
var kvConnectorCol = tableCol{"ext hit", vllm.Value{Name: vllm.ExternalHitRate.Name}, "%7.1f%%", 100}

var tableCols = []tableCol{
	{"hit rate", keyHitRate, "%7.1f%%", 100},
	{"preempt", keyPreemptions, "%7.0f", 1},
	{"kv mean", keyKVMean, "%7.2f", 1},
	{"kv max", keyKVMax, "%7.2f", 1},
	{"run mean", keyRunMean, "%8.1f", 1},
	{"run max", keyRunMax, "%7.0f", 1},
	{"wait mean", keyWaitMean, "%9.1f", 1},
	{"wait max", keyWaitMax, "%8.0f", 1},
	{"gen tok/s", keyGenPerS, "%9.0f", 1},
	{"ttft p50", keyTTFTP50, "%7.3fs", 1},
	{"ttft p95", keyTTFTP95, "%7.3fs", 1},
	{"tail s", keyTail, "%6.1f", 1},
}

func (t *stepTable) row(r *step.Record) {
	if t.rows == 0 {
		fmt.Fprintf(t.w, "%4s %6s %7s", "step", "secs", "workers")
		for _, c := range t.cols {
			fmt.Fprintf(t.w, " %*s", len(fmt.Sprintf(c.format, 0.0)), c.head)
		}
		fmt.Fprintln(t.w, " straggler")
	}
	t.rows++
	fmt.Fprintf(t.w, "%4d %6.1f %7d", r.Step, r.DurationS, r.Workers)
	for _, c := range t.cols {
		width := len(fmt.Sprintf(c.format, 0.0))
		v, ok := r.Metrics[c.key.Key(t.prefix)]
		if !ok {
			fmt.Fprintf(t.w, " %*s", width, "-")
			continue
		}
		fmt.Fprintf(t.w, " "+c.format, v*c.scale)
	}
	// The latest straggler, and how many more, in a last column of free width.
	fmt.Fprintln(t.w, " "+cmp.Or(stragglerName(r), "-"))
}

// demoBlocks sizes each simulated engine's KV cache so that every rollout batch fills it and
// preempts some requests (the simulator's default leaves some batches without preemptions).
const demoBlocks = 640
