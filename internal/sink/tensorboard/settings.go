package tensorboard

import (
	"path/filepath"
	"strings"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/config/yamlx"
	"github.com/vllmstat/vllmstat/internal/keyset"
)

// Settings are what a tensorboard entry of sinks: may set.
type Settings struct {
	// TrackerSettings are images (write the step's timeline plots as image summaries) and
	// per_worker (one scalar per worker and key, tagged "<key>/<worker>").
	config.TrackerSettings `yaml:",inline"`
	// Dir receives the event file; TensorBoard's --logdir points at it or a parent. Default
	// OUT_DIR/tensorboard.
	Dir string `yaml:"dir"`
	// Settings are keys (a preset: summary, standard or all, the default), include and
	// exclude (globs of key names), which choose the scalars written (see package keyset).
	keyset.Settings `yaml:",inline"`
}

// DefaultSettings returns the settings an entry leaves unset, for a run writing to outDir.
func DefaultSettings(outDir string) Settings {
	return Settings{TrackerSettings: config.DefaultTrackerSettings(), Dir: filepath.Join(outDir, "tensorboard")}
}

func (Settings) UnknownKey() string { return "unknown setting of a tensorboard sink: the settings are" }

func (Settings) YAMLExample() string { return "{type: tensorboard, images: false}" }

// Validate checks the values a decode alone does not; at says where they were given.
func (s Settings) Validate(at yamlx.Where) yamlx.Errors {
	es := s.Settings.Validate(at)
	if strings.TrimSpace(s.Dir) == "" {
		es = append(es, at.NotAllowed("dir", s.Dir, "must be a directory path (default OUT_DIR/tensorboard)"))
	}
	return es
}

// decodeSettings reads spec's mapping strictly and reports every problem at once, each with its
// key path and line, so that a typo fails the start instead of being ignored.
func decodeSettings(outDir string, spec config.SinkSpec) (Settings, error) {
	s := DefaultSettings(outDir)
	at, es := spec.Decode(&s)
	// A value the decode refused stayed at its default, which Validate accepts.
	es = append(es, s.Validate(at)...)
	return s, spec.Problems(es)
}
