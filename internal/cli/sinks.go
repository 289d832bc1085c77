package cli

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/sink"
)

// sinkTypes lists the sink types a config may name.
var sinkTypes = []string{"jsonl"}

// buildSinks makes the configured sinks, each behind its own queue. steps.jsonl is always
// written (it is the run's record); "jsonl" in the list is accepted for clarity.
func buildSinks(cfg config.Config, log *slog.Logger) ([]sink.Sink, error) {
	var out []sink.Sink
	var problems config.Problems
	for _, spec := range cfg.Sinks {
		switch spec.Type {
		case "jsonl":
		default:
			problems = append(problems, fmt.Sprintf("%s: unknown sink type %q; known: %s", spec.Path, spec.Type, strings.Join(sinkTypes, ", ")))
		}
	}
	if len(problems) > 0 {
		for _, s := range out {
			s.Close(nil)
		}
		return nil, problems
	}
	return out, nil
}
