package run

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/config/yamlx"
	"github.com/vllmstat/vllmstat/internal/plot"
	"github.com/vllmstat/vllmstat/internal/selfmetrics"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/sink/csvfile"
	"github.com/vllmstat/vllmstat/internal/sink/otlp"
	"github.com/vllmstat/vllmstat/internal/sink/remotewrite"
	"github.com/vllmstat/vllmstat/internal/sink/tensorboard"
	"github.com/vllmstat/vllmstat/internal/sink/wandb"
)

// sinkTypes are the sink types a config may name, by name. Adding a sink type is a package
// with a sink.Type, plus its line here.
var sinkTypes = map[string]sink.Type{
	"jsonl":        sink.JSONLType, // steps.jsonl, always written, or a second file with fewer keys
	"tensorboard":  tensorboard.Type,
	"wandb":        wandb.Type,
	"remote_write": remotewrite.Type,
	"csv":          csvfile.Type,
	"otlp":         otlp.Type,
}

// sinkTypeNames lists the known types, for messages.
func sinkTypeNames() string { return strings.Join(slices.Sorted(maps.Keys(sinkTypes)), ", ") }

// plannedSink is a sinks entry whose type and settings were checked.
type plannedSink struct {
	spec config.SinkSpec
	p    sink.Parsed
}

// parseSinks checks every sinks entry's type and settings, without side effects, and reports
// every problem at once, so that a run refused at start has created no file.
func parseSinks(cfg config.Config, log *slog.Logger) ([]plannedSink, error) {
	env := sinkEnv(cfg, log, false) // no type's settings depend on resuming
	var out []plannedSink
	var problems config.Problems
	for _, spec := range cfg.Sinks {
		t, ok := sinkTypes[spec.Type]
		if !ok {
			p := fmt.Sprintf("%s: unknown sink type %q; known: %s", spec.At(), spec.Type, sinkTypeNames())
			if s := yamlx.Suggest(spec.Type, slices.Collect(maps.Keys(sinkTypes))); s != "" {
				p += "; did you mean " + s + "?"
			}
			problems = append(problems, p)
			continue
		}
		p, err := t.Parse(env, spec)
		var ps config.Problems
		switch {
		case errors.As(err, &ps):
			problems = append(problems, ps...)
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", spec.Path, err))
		case !p.Builtin():
			out = append(out, plannedSink{spec, p})
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return out, nil
}

// CheckSinks checks the sinks' settings of cfg as Start does, without side effects: a
// config.Check, for Config.Validate to tell the sinks' problems with the others of the
// configuration, before anything starts.
func CheckSinks(cfg config.Config) error {
	_, err := parseSinks(cfg, nil)
	return err
}

// sinkEnv is what the sinks get from the run; resume says that the run continues the steps of
// the out_dir's steps.jsonl (see sink.Env.Resume).
func sinkEnv(cfg config.Config, log *slog.Logger, resume bool) sink.Env {
	return sink.Env{OutDir: cfg.OutDir, MetricPrefix: cfg.MetricPrefix, Logger: log, Resume: resume}
}

// buildSinks opens the planned sinks and puts them, after steps (written inline, first), into
// the runtime that delivers the run's records: each sink behind its own queue, so that a slow
// or failing one never holds step close or the others, and the plot stage in front of those
// that log images. The caller starts the runtime and closes it; it closes every sink. resume:
// the run continues the out_dir's steps (the collector's Options.Resume), so the sinks continue
// what the run before wrote there rather than start over.
func buildSinks(cfg config.Config, planned []plannedSink, steps sink.Sink, self *selfmetrics.Metrics, log *slog.Logger, resume bool) *sink.Runtime {
	env := sinkEnv(cfg, log, resume)
	rt := sink.NewRuntime(log)
	rt.AddInline(steps)
	if cfg.TimelinePlots || cfg.RecordTimelines {
		rt.SetPrepare("plots", plot.NewStage(cfg.OutDir, plot.StageOptions{Plots: cfg.TimelinePlots, Timelines: true}, log), 0)
	}
	for _, ps := range planned {
		s, err := ps.p.Open(env)
		if err != nil {
			// Settings are fine but the sink cannot start (an unwritable directory, say): the
			// run goes on, and the runtime retries opening it with backoff.
			log.Error("sink cannot start; retrying with backoff while the run goes on", "sink", ps.spec.Type, "err", err)
			s = sink.NewLazy(func() (sink.Sink, error) { return ps.p.Open(env) })
		}
		caps := ps.p.Caps()
		self.AddSink(ps.spec.Path, rt.Add(s, sink.LaneOptions{Name: ps.spec.Type, Images: caps.Images}))
		if st, ok := s.(interface{ Stats() *sink.Stats }); ok && caps.Intervals {
			self.AddSampleSink(ps.spec.Path, st.Stats())
		}
	}
	return rt
}
