// Package keyset chooses which of a step record's keys a sink writes: a preset (summary,
// standard or all), plus keys matching include globs, minus those matching exclude globs. A
// step record holds hundreds of keys; a tracker shows a chart per key and bills by series, so
// a sink that feeds one may take the few that are read.
package keyset

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config/yamlx"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Preset is a named key set: Summary, Standard or All.
type Preset string

// The presets; the empty Preset is the sink's own default.
const (
	Summary  Preset = "summary"
	Standard Preset = "standard"
	All      Preset = "all"
)

// Presets are the preset names, in the order of their size.
var Presets = []Preset{Summary, Standard, All}

// UnmarshalYAML reads a preset name, refusing any other.
func (p *Preset) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || !slices.Contains(Presets, Preset(n.Value)) {
		return yamlx.NotAllowed(n, "must be one of summary, standard, all")
	}
	*p = Preset(n.Value)
	return nil
}

// Settings are the keys, include and exclude settings of a sink entry. The sinks inline them
// in their own settings; the csv sink, whose keys may also list its columns, reads them apart.
type Settings struct {
	// Keys is the preset: summary, standard or all (the default).
	Keys Preset `yaml:"keys"`
	// Include adds the keys that match any of these globs to the preset's.
	Include []string `yaml:"include"`
	// Exclude takes the keys that match any of these globs out of the rest.
	Exclude []string `yaml:"exclude"`
}

// Validate refuses an empty glob, one that path.Match cannot read, and include with keys: all
// (which has every key already); at says where the settings were given.
func (s Settings) Validate(at yamlx.Where) yamlx.Errors {
	var es yamlx.Errors
	for _, l := range []struct {
		name  string
		globs []string
	}{{"include", s.Include}, {"exclude", s.Exclude}} {
		for i, g := range l.globs {
			if err := CheckGlob(g); err != nil {
				es = append(es, at.NotAllowed(fmt.Sprintf("%s[%d]", l.name, i), g, err.Error()))
			}
		}
	}
	if s.Keys == All && len(s.Include) > 0 {
		es = append(es, at.Problem("include", "adds keys to a preset, and keys: all has every key already: leave out include, or choose summary or standard"))
	}
	return es
}

// CheckGlob says why g is not a glob of key names, nil when it is one.
func CheckGlob(g string) error {
	if strings.TrimSpace(g) == "" {
		return fmt.Errorf("must be a glob of key names, e.g. vllm/time/*")
	}
	// path.Match reads the whole pattern before it answers, so a malformed one is an
	// error whatever the name.
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("not a glob (* matches within one /-separated part, ? one character, [...] a class; \\ escapes): %v", err)
	}
	return nil
}

// Set is a compiled key set: Keep says whether a sink writes a key. The nil *Set keeps every
// key.
type Set struct {
	preset  []string // the preset's globs under the run's engine prefixes; nil: every key
	include []string
	exclude []string
}

// Compile makes the Set of s for a run whose metric prefix is prefix; nil (every key) when s
// chooses every key. An entry without a preset starts from every key, or, when it gives
// includes, from none: its includes alone choose the keys.
func (s Settings) Compile(prefix string) *Set {
	p := s.Keys
	if p == "" && len(s.Include) > 0 {
		return &Set{preset: []string{}, include: s.Include, exclude: s.Exclude}
	}
	if p == "" || p == All {
		if len(s.Exclude) == 0 {
			return nil
		}
		return &Set{include: s.Include, exclude: s.Exclude}
	}
	return &Set{preset: Globs(p, prefix), include: s.Include, exclude: s.Exclude}
}

// Globs are preset p's globs under every engine prefix of a run whose metric prefix is prefix
// (vllm.EnginePrefix): each once; nil for All.
func Globs(p Preset, prefix string) []string {
	var names []string
	switch p {
	case Summary:
		names = summary
	case Standard:
		names = standard
	default:
		return nil
	}
	var out []string
	for e := range vllm.NumEngines {
		ep := vllm.EnginePrefix(prefix, e)
		for _, n := range names {
			if g := ep + "/" + n; !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

// Keep reports whether the set holds key, a key of a step record's metrics, of a phase's
// (step.PhaseKey) or of a worker's.
func (s *Set) Keep(key string) bool {
	if s == nil {
		return true
	}
	in := s.preset == nil || Match(s.preset, key) || Match(s.include, key)
	return in && !Match(s.exclude, key)
}

// Match reports whether key matches any of globs (path.Match: * within one /-separated part).
func Match(globs []string, key string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, key); ok {
			return true
		}
	}
	return false
}
