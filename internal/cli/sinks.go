package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/sink/remotewrite"
	"github.com/vllmstat/vllmstat/internal/sink/tensorboard"
	"github.com/vllmstat/vllmstat/internal/sink/wandb"
	"github.com/vllmstat/vllmstat/internal/step"
)

// sinkTypes lists the sink types a config may name.
var sinkTypes = []string{"jsonl", "tensorboard", "wandb", "remote_write"}

// namedSink is a sink behind its own queue, with its name for self-metrics.
type namedSink struct {
	name  string
	queue *sink.Queue
	// interval, when set, takes every worker's interval values (remote write's optional
	// per-interval samples); samples counts them for self-metrics.
	interval func(step.Interval)
	samples  *sink.Stats
	images   bool // logs the timeline plots, so comes after the plot stage
}

// buildSinks makes the configured tracker sinks, each behind its own queue, so that a slow or
// failing one never holds step close or the others. steps.jsonl is always written (it is the
// run's record); "jsonl" in the list is accepted for clarity. Every problem is reported at once.
func buildSinks(cfg config.Config, log *slog.Logger) ([]namedSink, error) {
	var out []namedSink
	var problems config.Problems
	for _, spec := range cfg.Sinks {
		var open func() (sink.Sink, error)
		switch spec.Type {
		case "jsonl":
			continue
		case "tensorboard":
			open = func() (sink.Sink, error) { return tensorboard.New(cfg.OutDir, spec, log) }
		case "wandb":
			open = func() (sink.Sink, error) { return wandb.New(cfg.OutDir, spec, log) }
		case "remote_write":
			// A network sink: settings are checked here, and the writer retries on its own.
			rw, err := remotewrite.New(spec, cfg.MetricPrefix, log)
			var ps config.Problems
			if errors.As(err, &ps) {
				problems = append(problems, ps...)
				continue
			} else if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", spec.Path, err))
				continue
			}
			out = append(out, namedSink{name: spec.Path, queue: sink.NewQueue(rw, sink.QueueOptions{Name: spec.Path, Logger: log}),
				interval: rw.Interval, samples: rw.Stats()})
			continue
		default:
			problems = append(problems, fmt.Sprintf("%s: unknown sink type %q; known: %s", spec.Path, spec.Type, strings.Join(sinkTypes, ", ")))
			continue
		}
		s, err := open()
		var ps config.Problems
		switch {
		case errors.As(err, &ps):
			problems = append(problems, ps...)
			continue
		case err != nil:
			// Settings are fine but the sink cannot start (an unwritable directory, say): the
			// run goes on, and the sink's queue retries opening it with backoff.
			log.Error("sink cannot start; retrying with backoff while the run goes on", "sink", spec.Type, "err", err)
			s = sink.NewLazy(open)
		}
		out = append(out, namedSink{name: spec.Path, queue: sink.NewQueue(s, sink.QueueOptions{Name: spec.Type, Logger: log}),
			images: spec.Type == "tensorboard" || spec.Type == "wandb"})
	}
	if len(problems) > 0 {
		for _, s := range out {
			s.queue.Close(context.Background())
		}
		return nil, problems
	}
	return out, nil
}
