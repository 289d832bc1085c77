// Package csvfile is the csv sink: one row per step, with the step number, its end time and the
// chosen metric keys, appended to OUT_DIR/steps.csv (or the path setting's file), for a
// spreadsheet or a plotting script.
package csvfile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/appendlog"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/config/yamlx"
	"github.com/vllmstat/vllmstat/internal/keyset"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Type is the csv sink's entry in the sink registry.
var Type = sink.NewType(parse, open, sink.Caps{})

var _ sink.Sink = (*Writer)(nil)

// DefaultKeys are the columns of a csv entry without keys (after the run's metric prefix): the
// figures of the step summary line.
var DefaultKeys = []string{"prefix_cache_hit_rate", "num_preemptions", "kv_cache_usage_perc/mean", "kv_cache_usage_perc/max",
	"num_requests_running/mean", "num_requests_waiting/mean", "generation_tokens_per_s", "time_to_first_token_seconds/p50",
	"straggler_tail_s"}

// Settings are what a csv entry of sinks: may set.
type Settings struct {
	// Keys are the metric keys of the columns after step and end, e.g.
	// [vllm/prefix_cache_hit_rate, vllm/num_preemptions], or a phase's, e.g.
	// vllm/rollout/prefix_cache_hit_rate; a step without a key has an empty cell. Or a preset
	// (summary, standard, all; see package keyset): the columns are then the keys of the first
	// step that it holds. Without keys, DefaultKeys.
	Keys Columns `yaml:"keys"`
	// Include adds a column for each key of the first step that matches one of these globs.
	Include []string `yaml:"include"`
	// Exclude leaves out the columns whose keys match one of these globs.
	Exclude []string `yaml:"exclude"`
	// Path is the file; default OUT_DIR/steps.csv. An existing file with the same columns is
	// appended to; one with other columns is kept under another name (steps.1.csv, the first
	// free number) and a new file started.
	Path string `yaml:"path"`
	// defaults is set for an entry without keys: its columns are DefaultKeys under the
	// prefixes of the engines of the fleet, known at its first step (see Writer.Write).
	defaults bool
}

// Columns are a csv entry's keys: a list of keys, or a preset's name.
type Columns struct {
	List   []string
	Preset keyset.Preset
}

// UnmarshalYAML reads a list of keys, or a preset's name.
func (c *Columns) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var p keyset.Preset
		if err := p.UnmarshalYAML(n); err != nil {
			return yamlx.NotAllowed(n, "must be a list of metric keys, e.g. [vllm/prefix_cache_hit_rate], or a preset: summary, standard or all")
		}
		*c = Columns{Preset: p}
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return yamlx.NotAllowed(n, "must be a list of metric keys, e.g. [vllm/prefix_cache_hit_rate], or a preset: summary, standard or all")
	}
	var list []string
	var es yamlx.Errors
	for i, k := range n.Content {
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
			es = append(es, yamlx.Error{Path: fmt.Sprintf("[%d]", i), Line: k.Line, Msg: yamlx.Show(k) + " is not allowed: must be a string"})
			continue
		}
		list = append(list, k.Value)
	}
	if len(es) > 0 {
		return es
	}
	*c = Columns{List: list}
	return nil
}

// fromFirstStep reports whether columns come from the keys of the first step: a preset's, or
// included ones.
func (s Settings) fromFirstStep() bool { return s.Keys.Preset != "" || len(s.Include) > 0 }

func (Settings) UnknownKey() string { return "unknown setting of a csv sink: the settings are" }

func (Settings) YAMLExample() string { return "{type: csv, keys: [vllm/prefix_cache_hit_rate]}" }

func parse(e sink.Env, spec config.SinkSpec) (Settings, error) {
	s := Settings{Path: filepath.Join(e.OutDir, "steps.csv")}
	at, es := spec.Decode(&s)
	switch {
	case !at.Has("keys") && len(s.Include) == 0: // "--sinks csv": the figures the step summary shows
		s.defaults = true
	case at.Has("keys") && at["keys"].Kind == yaml.SequenceNode && len(at["keys"].Content) == 0:
		es = append(es, at.Problem("keys", "empty: list the metric keys of the columns, e.g. [vllm/prefix_cache_hit_rate], or leave keys out for the default ones"))
	}
	es = append(es, keyset.Settings{Keys: s.Keys.Preset, Include: s.Include, Exclude: s.Exclude}.Validate(at)...)
	if s.Path == "" {
		es = append(es, at.NotAllowed("path", s.Path, "must be a file path (default OUT_DIR/steps.csv)"))
	}
	return s, spec.Problems(es)
}

// LastStep is the step of the file's last whole row (a part row a kill left is none). A file
// whose last row does not start with a whole number (the header alone, or a file of other
// columns) holds no step.
func (s Settings) LastStep() (sink.Held, bool, error) {
	f, err := os.Open(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return sink.Held{}, false, nil
	}
	if err != nil {
		return sink.Held{}, false, fmt.Errorf("read the steps of %q: %w", s.Path, err)
	}
	defer f.Close()
	line, err := appendlog.LastWholeLine(f)
	if err != nil {
		return sink.Held{}, false, fmt.Errorf("read the steps of %q: %w", s.Path, err)
	}
	first, _, _ := bytes.Cut(line, []byte{','})
	n, err := strconv.ParseInt(string(bytes.TrimSpace(first)), 10, 64)
	if err != nil {
		return sink.Held{}, false, nil
	}
	return sink.Held{Step: n, File: s.Path}, true, nil
}

// Writer appends one row per step, each row whole or not at all (a failed write is cut back
// before the retry).
type Writer struct {
	f      *appendlog.Log // nil until the first step of an entry whose columns it chooses
	keys   []string       // the columns after step and end
	set    Settings
	chosen *keyset.Set // the keys of the first step that are columns, when set.fromFirstStep
	prefix string      // the run's metric prefix, to find phase keys
	path   string
	log    *slog.Logger
}

// open opens the file for appending. A part row at its end (a run killed in the middle of a
// write) is cut off. A file whose header is not this run's columns is never appended to, as its
// rows would then mean other keys: it is moved aside, whole, and a new file started.
func open(e sink.Env, set Settings) (sink.Sink, error) {
	log := e.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	prefix := e.MetricPrefix
	if prefix == "" {
		prefix = vllm.Prefix
	}
	if err := os.MkdirAll(filepath.Dir(set.Path), 0o755); err != nil {
		return nil, fmt.Errorf("create csv directory: %w", err)
	}
	w := &Writer{prefix: prefix, path: set.Path, log: log, set: set}
	if set.fromFirstStep() {
		w.chosen = keyset.Settings{Keys: set.Keys.Preset, Include: set.Include}.Compile(prefix)
	}
	if !set.defaults && !set.fromFirstStep() {
		if err := w.openWith(w.columns(nil)); err != nil {
			return nil, err
		}
	}
	warnUnknownKeys(log, prefix, set.Keys.List)
	return w, nil
}

// openWith opens the file with keys as its columns.
func (w *Writer) openWith(keys []string) error {
	header := append([]string{"step", "end"}, keys...)
	f, err := openFile(w.path, header, w.log)
	if err != nil {
		return err
	}
	rf, err := appendlog.New(f, w.path)
	if err == nil && rf.Size() == 0 {
		err = rf.Append(row(header))
	}
	if err != nil {
		f.Close()
		return err
	}
	w.f, w.keys = rf, keys
	return nil
}

// columns are the keys of the file's columns: the listed ones, or DefaultKeys for the fleet of
// r, then those of r (every key, phases' among them, sorted) that the preset or an include
// chooses, less those an exclude matches. r is the first step, nil when the columns are the
// listed ones alone.
func (w *Writer) columns(r *step.Record) []string {
	base := w.set.Keys.List
	if w.set.defaults {
		base = defaultKeys(w.prefix, r)
	}
	var out []string
	add := func(k string) {
		if !keyset.Match(w.set.Exclude, k) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	for _, k := range base {
		add(k)
	}
	if r != nil && w.set.fromFirstStep() {
		m := r.Scalars(w.prefix)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if w.chosen.Keep(k) {
				add(k)
			}
		}
	}
	return out
}

// defaultKeys are DefaultKeys under the prefix of each kind of engine whose keys r has, in the
// engines' order; vLLM's when it has none (a step of no engine).
func defaultKeys(prefix string, r *step.Record) []string {
	var keys []string
	for e := range vllm.NumEngines {
		p := vllm.EnginePrefix(prefix, e) + "/"
		if e != vllm.VLLM && p == prefix+"/" {
			continue // a prefix that names every engine's keys alike
		}
		has := false
		for k := range r.Metrics {
			if strings.HasPrefix(k, p) {
				has = true
				break
			}
		}
		if has {
			for _, k := range DefaultKeys {
				keys = append(keys, p+k)
			}
		}
	}
	if keys == nil {
		for _, k := range DefaultKeys {
			keys = append(keys, prefix+"/"+k)
		}
	}
	return keys
}

// warnUnknownKeys warns of each key that no step record has, whose column would stay empty
// for the whole run, with the nearest key one has. It is a warning, not a refusal: a split
// label's values (a finish reason, a draft position) are the engines' to make, not known here.
// The sink is open by then, so a sink opened again after a failure does not warn again.
func warnUnknownKeys(log *slog.Logger, prefix string, keys []string) {
	for _, k := range keys {
		if knownKey(prefix, k) {
			continue
		}
		attrs := []any{"key", k}
		if n := nearestKey(prefix, k); n != "" {
			attrs = append(attrs, "did_you_mean", n)
		}
		log.Warn("csv key that no step record has: its column stays empty", attrs...)
	}
}

// openFile opens path, empty or ending with a whole row under header.
func openFile(path string, header []string, log *slog.Logger) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open csv file: %w", err)
	}
	n, err := appendlog.CutPartialLine(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	if n > 0 {
		log.Warn("csv file ended with a part row (a run stopped in the middle of a write); cut it off", "path", path, "bytes", n)
	}
	had, err := fileHeader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read the header of %q: %w", path, err)
	}
	if had == nil || slices.Equal(had, header) {
		return f, nil
	}
	f.Close()
	kept, err := moveAside(path)
	if err != nil {
		return nil, err
	}
	log.Warn("csv file has other columns than this run's keys; kept it under another name and started a new file",
		"path", path, "kept_as", kept, "its_columns", strings.Join(had, ","), "columns", strings.Join(header, ","))
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open csv file: %w", err)
	}
	return f, nil
}

// fileHeader is the first row of f, nil when f is empty; a first row that does not parse is
// an empty one, which no run's header equals.
func fileHeader(f *os.File) ([]string, error) {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return nil, err
	}
	line, err := bufio.NewReader(io.NewSectionReader(f, 0, st.Size())).ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	cells, err := csv.NewReader(bytes.NewReader(line)).Read()
	if err != nil {
		return []string{}, nil
	}
	return cells, nil
}

// moveAside renames path to the first free <name>.<n><ext> (steps.1.csv, steps.2.csv, ...) and
// returns that name.
func moveAside(path string) (string, error) {
	ext := filepath.Ext(path)
	stem := strings.TrimSuffix(path, ext)
	for n := 1; ; n++ {
		p := stem + "." + strconv.Itoa(n) + ext
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			if err := os.Rename(path, p); err != nil {
				return "", fmt.Errorf("keep the csv file of other columns: %w", err)
			}
			return p, nil
		} else if err != nil {
			return "", fmt.Errorf("keep the csv file of other columns: %w", err)
		}
	}
}

// Write appends r's row. The record is shared and only read.
func (w *Writer) Write(_ context.Context, r *step.Record) error {
	if w.f == nil {
		if err := w.openWith(w.columns(r)); err != nil {
			return err
		}
	}
	m := r.Scalars(w.prefix)
	cells := []string{strconv.FormatInt(r.Step, 10), r.End.UTC().Format(time.RFC3339Nano)}
	for _, k := range w.keys {
		v, ok := m[k]
		if !ok {
			cells = append(cells, "")
			continue
		}
		cells = append(cells, strconv.FormatFloat(v, 'g', -1, 64))
	}
	return w.f.Append(row(cells))
}

// Close closes the file.
func (w *Writer) Close(context.Context) error {
	if w.f == nil {
		return nil
	}
	return w.f.Close()
}

func row(cells []string) []byte {
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	cw.Write(cells)
	cw.Flush()
	return b.Bytes()
}

// CutAfter takes the rows of the steps after n out of the file, into steps.csv.cut-<k> beside
// it (see appendlog.CutLines); the header and rows of no step stay.
func (s Settings) CutAfter(n int64) ([]sink.Cut, error) {
	side, rows, err := appendlog.CutLines(s.Path, func(line []byte) bool {
		first, _, _ := bytes.Cut(line, []byte{','})
		k, err := strconv.ParseInt(string(bytes.TrimSpace(first)), 10, 64)
		return err == nil && k > n
	})
	if err != nil || rows == 0 {
		return nil, err
	}
	return []sink.Cut{{File: s.Path, Side: side, Records: rows}}, nil
}
