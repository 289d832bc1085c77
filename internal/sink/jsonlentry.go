package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/vllmstat/vllmstat/internal/appendlog"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/config/yamlx"
	"github.com/vllmstat/vllmstat/internal/keyset"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// JSONLType is the jsonl entry of sinks:. Without a path it names OUT_DIR/steps.jsonl, which
// every run writes whole (the report, resuming and the API read it), so it takes no other
// keys than all. With a path it is a second file of step records with the keys chosen by
// keys, include and exclude, e.g. {type: jsonl, path: lean.jsonl, keys: summary}.
var JSONLType = NewType(parseJSONL, openJSONL, Caps{})

// JSONLSettings are what a jsonl entry of sinks: may set.
type JSONLSettings struct {
	// Path is the file of the records with the chosen keys; empty for OUT_DIR/steps.jsonl.
	Path string `yaml:"path"`
	// Settings are keys (a preset: summary, standard or all, the default), include and
	// exclude (globs of key names), which choose the keys of the records (see package keyset).
	keyset.Settings `yaml:",inline"`
}

func (JSONLSettings) UnknownKey() string { return "unknown setting of a jsonl sink: the settings are" }

func (JSONLSettings) YAMLExample() string {
	return "{type: jsonl, path: lean.jsonl, keys: summary}"
}

// steps reports whether the entry names the run's own steps.jsonl, which the run writes
// itself.
func (s JSONLSettings) steps() bool { return s.Path == "" }

// Builtin is true for the entry of the run's own steps.jsonl: nothing to open.
func (s JSONLSettings) Builtin() bool { return s.steps() }

func parseJSONL(e Env, spec config.SinkSpec) (JSONLSettings, error) {
	var s JSONLSettings
	at, es := spec.Decode(&s)
	es = append(es, s.Settings.Validate(at)...)
	own := filepath.Join(e.OutDir, "steps.jsonl")
	switch {
	case at.Has("path") && strings.TrimSpace(s.Path) == "":
		es = append(es, at.NotAllowed("path", s.Path, "must be a file path, for a file other than OUT_DIR/steps.jsonl"))
	case at.Has("path") && filepath.Clean(s.Path) == filepath.Clean(own):
		es = append(es, at.NotAllowed("path", s.Path, "is the run's own steps file, which it writes whole; give another file for records with fewer keys"))
	case s.steps():
		for _, k := range []string{"include", "exclude"} {
			if at.Has(k) {
				es = append(es, at.Problem(k, "steps.jsonl always holds every key (the report, resuming and the API read it); give a path for a second file with the chosen keys, e.g. {type: jsonl, path: lean.jsonl, keys: summary}"))
			}
		}
		if s.Keys != "" && s.Keys != keyset.All {
			es = append(es, at.NotAllowed("keys", s.Keys, "steps.jsonl always holds every key (the report, resuming and the API read it); give a path for a second file with the chosen keys, e.g. {type: jsonl, path: lean.jsonl, keys: summary}"))
		}
	}
	return s, spec.Problems(es)
}

func openJSONL(e Env, s JSONLSettings) (Sink, error) {
	prefix := e.MetricPrefix
	if prefix == "" {
		prefix = vllm.Prefix
	}
	j, err := OpenJSONL(s.Path, JSONLOptions{Logger: e.Logger})
	if err != nil {
		return nil, err
	}
	return &keyedJSONL{JSONL: j, keys: s.Settings.Compile(prefix), prefix: prefix}, nil
}

// keyedJSONL is a JSONL of records with the chosen keys.
type keyedJSONL struct {
	*JSONL
	keys   *keyset.Set
	prefix string
}

func (k *keyedJSONL) Write(ctx context.Context, r *step.Record) error {
	return k.JSONL.Write(ctx, k.keys.Record(r, k.prefix))
}

// LastStep is the step of the file's last whole line, which a run continuing the out_dir
// must not write again (see StepKeeper).
func (s JSONLSettings) LastStep() (Held, bool, error) {
	if s.steps() {
		return Held{}, false, nil // the run reads its own steps file
	}
	f, err := os.Open(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return Held{}, false, nil
	}
	if err != nil {
		return Held{}, false, fmt.Errorf("read the steps of %q: %w", s.Path, err)
	}
	defer f.Close()
	line, err := appendlog.LastWholeLine(f)
	if err != nil {
		return Held{}, false, fmt.Errorf("read the steps of %q: %w", s.Path, err)
	}
	n, ok := lineStep(line)
	return Held{Step: n, File: s.Path}, ok, nil
}

// CutAfter takes the records of the steps after n out of the file, into <path>.cut-<k> beside
// it (see appendlog.CutLines).
func (s JSONLSettings) CutAfter(n int64) ([]Cut, error) {
	if s.steps() {
		return nil, nil
	}
	side, lines, err := appendlog.CutLines(s.Path, func(line []byte) bool {
		k, ok := lineStep(line)
		return ok && k > n
	})
	if err != nil || lines == 0 {
		return nil, err
	}
	return []Cut{{File: s.Path, Side: side, Records: lines}}, nil
}

// lineStep is the step of a record's line.
func lineStep(line []byte) (int64, bool) {
	var r struct {
		Step *int64 `json:"step"`
	}
	if json.Unmarshal(line, &r) != nil || r.Step == nil {
		return 0, false
	}
	return *r.Step, true
}

var _ yamlx.UnknownKeyer = JSONLSettings{}
