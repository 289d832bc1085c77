package cli

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/decimal"
	"github.com/vllmstat/vllmstat/internal/discovery"
	"github.com/vllmstat/vllmstat/internal/run"
	"github.com/vllmstat/vllmstat/internal/target"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// runFlags are the flags that override a config file's settings.
type runFlags struct {
	configPath    string
	targets       listFlag
	interval      float64
	stepEvery     string
	scrapeTimeout string
	outDir        string
	resumeFrom    int64
	prefix        string
	perWorker     bool
	logScalars    bool
	record        string
	listen        string
	workerLabels  string
	targetsFile   string
	sinks         string
	gpu           string
	args          []string // targets given as arguments
}

// register defines the flags, with config.Default()'s values as their defaults.
func (f *runFlags) register(fs *flag.FlagSet) {
	def := config.Default()
	fs.StringVar(&f.configPath, "config", "", "YAML config `file` (vllmstat keys, or a NeMo-RL config with vllm_cfg logger keys)")
	fs.Var(&f.targets, "target", "a /metrics `URL` or host:port to scrape, or a dns+http://NAME:PORT/metrics or dnssrv+http://NAME/metrics name to resolve (repeatable; adds to the config's targets)")
	fs.Float64Var(&f.interval, "interval", def.Interval, "scrape interval in `seconds` (vllm_metrics_logger_interval)")
	fs.StringVar(&f.stepEvery, "step-every", def.StepEvery.String(), "close a step this often, e.g. 30s; 0 closes steps only on request and at exit")
	fs.StringVar(&f.scrapeTimeout, "scrape-timeout", "", "timeout of one scrape (default 80% of the interval, at most 10s)")
	fs.StringVar(&f.outDir, "out", def.OutDir, "output `directory` (steps.jsonl, ...)")
	fs.Int64Var(&f.resumeFrom, "resume-from", 0, "cut the output directory's steps back to step `N`, keeping those after it in .cut-K files beside theirs, and go on with step N+1, for a trainer resumed from its checkpoint of step N (resume_from)")
	fs.StringVar(&f.prefix, "metric-prefix", def.MetricPrefix, "replaces the leading \"vllm\" of every metric key")
	fs.BoolVar(&f.perWorker, "per-worker", def.PerWorker, "add per-worker metrics to every step record")
	fs.BoolVar(&f.logScalars, "log-scalars", def.LogScalars, "add mean/max/p95 of the per-interval samples (vllm_metrics_log_scalars)")
	fs.StringVar(&f.listen, "listen", def.Listen, "`address` of the HTTP API (step ends, live view); \"\" for none")
	fs.StringVar(&f.record, "record", def.Record, "write everything scraped to this recording `file` (.gz to compress) for replay")
	fs.StringVar(&f.workerLabels, "worker-labels", strings.Join(def.WorkerLabels, ","), workerLabelsUsage)
	fs.StringVar(&f.targetsFile, "targets-file", "", "read targets from `FILE`: one /metrics URL or host:port per line, # starts a comment (adds to the config's targets)")
	fs.StringVar(&f.sinks, "sinks", "", "comma-separated tracker `sinks` to add to the config's, e.g. tensorboard,wandb,csv")
	fs.StringVar(&f.gpu, "gpu", "", gpuUsage)
}

// gpuUsage documents --gpu, for run, demo and replay alike.
var gpuUsage = "the engines' `GPU` (gpu), whose peak makes MFU and MBU of the engines' compute estimates: " + strings.Join(vllm.GPUNames(), ", ") +
	", or the name the GPU reports, e.g. \"NVIDIA H100 80GB HBM3\""

// workerLabelsUsage documents --worker-labels, for run and replay alike.
const workerLabelsUsage = "comma-separated `labels` that, with target and engine, tell workers apart (worker_labels); \"\" for none"

// labelList reads a comma-separated list of label names; "" is the empty list, not nil (nil
// would mean the default).
func labelList(s string) []string {
	out := []string{}
	for _, l := range strings.Split(s, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// load builds the configuration: defaults, then the file, then the flags that were set. Every
// problem is reported at once.
func (f *runFlags) load(fs *flag.FlagSet) (config.Config, error) {
	c := config.Default()
	var problems config.Problems
	if f.configPath != "" {
		var err error
		c, err = config.Load(f.configPath)
		if err != nil {
			if ps, ok := err.(config.Problems); ok {
				for _, p := range ps {
					problems = append(problems, f.configPath+": "+p)
				}
			} else {
				return c, err
			}
		}
	}
	fs.Visit(func(fl *flag.Flag) {
		path := "--" + fl.Name
		switch fl.Name {
		case "target":
			c.Targets = append(c.Targets, config.TargetsOf(f.targets)...)
			c.SetPath("targets", path)
		case "interval":
			c.Interval = f.interval
			c.SetPath(config.KeyInterval, path)
		case "step-every", "scrape-timeout":
			d, err := parseDuration(fl.Value.String())
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %q is not allowed: must be a duration such as 30s or a number of seconds", path, fl.Value.String()))
				return
			}
			if fl.Name == "step-every" {
				c.StepEvery = d
				c.SetPath("step_every", path)
			} else {
				c.ScrapeTimeout = d
				c.SetPath("scrape_timeout", path)
			}
		case "out":
			c.OutDir = f.outDir
			c.SetPath("out_dir", path)
		case "resume-from":
			n := f.resumeFrom
			c.ResumeFrom = &n
			c.SetPath("resume_from", path)
		case "metric-prefix":
			c.MetricPrefix = f.prefix
			c.SetPath("metric_prefix", path)
		case "gpu":
			c.GPU = f.gpu
			c.SetPath("gpu", path)
		case "per-worker":
			c.PerWorker = f.perWorker
		case "log-scalars":
			c.LogScalars = f.logScalars
		case "record":
			c.Record = f.record
		case "listen":
			c.Listen = f.listen
			c.SetPath("listen", path)
		case "worker-labels":
			c.WorkerLabels = labelList(f.workerLabels)
			c.SetPath("worker_labels", path)
		case "targets-file":
			ts, ps := readTargetsFile(f.targetsFile)
			problems = append(problems, ps...)
			c.Targets = append(c.Targets, config.TargetsOf(ts)...)
			c.SetPath("targets", path+" "+f.targetsFile)
		case "sinks":
			for _, name := range strings.Split(f.sinks, ",") {
				if name = strings.TrimSpace(name); name != "" {
					c.Sinks = append(c.Sinks, config.SinkSpec{Type: name, Path: path})
				}
			}
		}
	})
	if t := os.Getenv("VLLMSTAT_API_TOKEN"); t != "" && c.APIToken.Reveal() == "" {
		c.APIToken = target.NewSecret(t)
	}
	if len(f.args) > 0 {
		c.Targets = append(c.Targets, config.TargetsOf(f.args)...)
		c.SetPath("targets", "arguments")
	}
	if err := c.Validate(run.CheckSinks); err != nil {
		problems = append(problems, err.(config.Problems)...)
	}
	if len(problems) > 0 {
		return c, problems
	}
	return c, nil
}

// readTargetsFile reads a targets file: one /metrics URL, host:port or dns+ name per line;
// blank lines and everything after # are ignored, so that the URLs "vllmstat sim" prints (or
// any list with comments) work as they are. Each bad line is a problem naming its line.
func readTargetsFile(path string) ([]string, config.Problems) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, config.Problems{fmt.Sprintf("--targets-file: %v", err)}
	}
	var ts []string
	var ps config.Problems
	for i, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if !discovery.IsDNS(line) {
			if _, err := target.Parse(line); err != nil {
				ps = append(ps, fmt.Sprintf("--targets-file %s:%d: %q is not a target: %v", path, i+1, target.Redact(line), err))
				continue
			}
		}
		ts = append(ts, line)
	}
	if len(ts) == 0 && len(ps) == 0 {
		ps = append(ps, fmt.Sprintf("--targets-file %s: no targets in it (one /metrics URL or host:port per line)", path))
	}
	return ts, ps
}

// maxSeconds bounds a number of seconds that becomes a time.Duration, which holds up to
// about 292 years; a larger one would wrap around to a negative duration.
const maxSeconds = float64(math.MaxInt64 / int64(time.Second))

func parseDuration(s string) (time.Duration, error) {
	if f, err := decimal.ParseFloat(s); err == nil {
		if f < 0 || f >= maxSeconds {
			return 0, fmt.Errorf("out of range")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err == nil && d < 0 {
		err = fmt.Errorf("negative")
	}
	return d, err
}
