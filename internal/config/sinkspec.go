package config

import (
	"cmp"
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config/yamlx"
)

// SinkSpec is one entry of sinks: a type ("jsonl", "tensorboard", "wandb", "remote_write", ...)
// and its own settings, which the sink package decodes (Decode) and checks.
type SinkSpec struct {
	Type     string
	Path     string     // key path of the entry, for error messages
	Line     int        // line of the entry in its file, 0 for one a flag added
	Settings *yaml.Node // the entry's mapping (nil for a bare name)
	node     *yaml.Node // the entry, to find its place in the list
}

// UnmarshalYAML reads a sink type ("tensorboard") or a mapping with a type key and the sink's
// settings ({type: wandb, project: rl}); parse sets Path.
func (s *SinkSpec) UnmarshalYAML(n *yaml.Node) error {
	s.Line, s.node = n.Line, n
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" || n.Value == "" {
			return yamlx.Problem(n, "must be a sink type or a mapping with a type key")
		}
		s.Type = n.Value
		return nil
	case yaml.MappingNode:
		t := get(n, "type")
		if t == nil || t.Kind != yaml.ScalarNode || t.Value == "" {
			return yamlx.Problem(n, "a sink with settings needs a type key, e.g. {type: wandb, project: rl}")
		}
		s.Type, s.Settings = t.Value, n
		return nil
	}
	return yamlx.Problem(n, "must be a sink type or a mapping with a type key")
}

// Decode reads the entry's settings into out, a pointer to the sink's settings struct holding
// its defaults, strictly (type aside: it chose the sink). A bare name leaves out as it is.
func (s SinkSpec) Decode(out any) (yamlx.Where, yamlx.Errors) {
	if s.Settings == nil {
		return yamlx.Where{}, nil
	}
	return yamlx.Decode(s.Settings, out, yamlx.Options{Ignore: []string{"type"}})
}

// At is the entry's path and line for a problem of the entry as a whole: "sinks[1] (line 7)",
// or the path alone for an entry a flag added.
func (s SinkSpec) At() string {
	if s.Line == 0 {
		return s.Path
	}
	return fmt.Sprintf("%s (line %d)", s.Path, s.Line)
}

// Problems renders a sink's problems under the entry's path, in the order of their lines.
func (s SinkSpec) Problems(es yamlx.Errors) error {
	if len(es) == 0 {
		return nil
	}
	es = slices.Clone(es)
	slices.SortStableFunc(es, func(a, b yamlx.Error) int { return cmp.Compare(a.Line, b.Line) })
	return Problems(es.Strings(s.Path))
}

// TrackerSettings are the settings the tracker sinks (tensorboard, wandb) share, inlined in
// theirs.
type TrackerSettings struct {
	// Images logs the step's timeline plots as images (default true).
	Images bool `yaml:"images"`
	// PerWorker adds one series per worker and key, "<key>/<worker>".
	PerWorker bool `yaml:"per_worker"`
}

// DefaultTrackerSettings are the tracker settings an entry leaves unset.
func DefaultTrackerSettings() TrackerSettings { return TrackerSettings{Images: true} }
