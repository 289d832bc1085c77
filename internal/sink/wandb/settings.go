package wandb

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/config/yamlx"
	"github.com/vllmstat/vllmstat/internal/keyset"
)

// Settings are what a wandb entry of sinks: may set.
type Settings struct {
	// Project is the W&B project of the run; default "vllmstat".
	Project string `yaml:"project"`
	// Entity is the user or team owning the project; empty means the default entity of
	// whoever runs wandb sync.
	Entity string `yaml:"entity"`
	// Group is the run's group, e.g. the trainer's run group.
	Group string `yaml:"group"`
	// Name is the run's display name.
	Name string `yaml:"name"`
	// RunID names the run and its files; default 8 random characters [a-z0-9] as W&B makes them,
	// or, for a run that continues an out_dir's steps, the id of the W&B run written there
	// before, so that wandb sync makes one run of both.
	RunID string `yaml:"run_id"`
	// Config is the run config, one item per top-level key, values as JSON, in file order.
	Config RunConfig `yaml:"config"`
	// TrackerSettings are images (copy the step's plots into the run and log them as images)
	// and per_worker (one history key per worker and metric, "<key>/<worker>").
	config.TrackerSettings `yaml:",inline"`
	// Settings are keys (a preset: summary, standard or all, the default), include and
	// exclude (globs of key names), which choose the history keys (see package keyset).
	keyset.Settings `yaml:",inline"`

	// drawnID: RunID was drawn at decode, not given; a run that continues an out_dir then
	// takes the id of the W&B run written there before instead.
	drawnID bool
}

// DefaultSettings returns the settings an entry leaves unset (but RunID, drawn at decode).
func DefaultSettings() Settings {
	return Settings{Project: "vllmstat", TrackerSettings: config.DefaultTrackerSettings()}
}

func (Settings) UnknownKey() string { return "unknown setting of a wandb sink: the settings are" }

func (Settings) YAMLExample() string { return "{type: wandb, project: rl}" }

// forbidden are the characters W&B refuses in project names and run ids.
const forbidden = `/\#?%:`

// Validate checks the values a decode alone does not; at says where they were given.
func (s Settings) Validate(at yamlx.Where) yamlx.Errors {
	es := s.Settings.Validate(at)
	if !validName(s.Project) {
		es = append(es, at.NotAllowed("project", s.Project, "must be a W&B project name: not empty, at most 128 characters, none of "+forbidden))
	}
	if at.Has("run_id") && !validName(s.RunID) {
		es = append(es, at.NotAllowed("run_id", s.RunID, "must be a W&B run id: not empty, at most 128 characters, no spaces, none of "+forbidden))
	}
	return es
}

// decodeSettings reads spec's mapping strictly and reports every problem at once, each with its
// key path and line, so that a typo fails the start instead of being ignored.
func decodeSettings(spec config.SinkSpec) (Settings, error) {
	s := DefaultSettings()
	at, es := spec.Decode(&s)
	// A value the decode refused stayed at its default, which Validate accepts.
	es = append(es, s.Validate(at)...)
	if len(es) > 0 {
		return s, spec.Problems(es)
	}
	if s.RunID == "" {
		s.RunID, s.drawnID = randomID(), true
	}
	return s, nil
}

func validName(s string) bool {
	return s != "" && len(s) <= 128 && !strings.ContainsAny(s, forbidden+" \t\r\n")
}

// RunConfig is a wandb run's config: one item per top-level key of a mapping, in file order,
// its value as JSON.
type RunConfig []item

// UnmarshalYAML reads a mapping of config keys to any values that JSON can represent.
func (rc *RunConfig) UnmarshalYAML(v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return yamlx.NotAllowed(v, "must be a mapping of config keys to values, e.g. {model: qwen3-8b, lr: 1e-6}")
	}
	var items RunConfig
	var es yamlx.Errors
	first := map[string]int{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if l, dup := first[k.Value]; dup {
			es = append(es, yamlx.Error{Path: k.Value, Line: k.Line, Msg: fmt.Sprintf("is given twice, at lines %d and %d", l, k.Line)})
			continue
		}
		first[k.Value] = k.Line
		var x any
		if err := val.Decode(&x); err != nil {
			es = append(es, yamlx.Error{Path: k.Value, Line: k.Line, Msg: fmt.Sprintf("%s is not allowed: %v", yamlx.Show(val), err)})
			continue
		}
		b, err := json.Marshal(x)
		if err != nil {
			es = append(es, yamlx.Error{Path: k.Value, Line: k.Line, Msg: fmt.Sprintf("%s is not allowed: must be representable in JSON (%v)", yamlx.Show(val), err)})
			continue
		}
		items = append(items, item{k.Value, string(b)})
	}
	if len(es) > 0 {
		return es
	}
	*rc = items
	return nil
}

// randomID makes a run id as W&B does: 8 characters of [a-z0-9]. It names files, so it needs
// to be unlikely to repeat, not unpredictable.
func randomID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 8)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}
