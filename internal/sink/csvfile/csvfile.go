// Package csvfile is the csv sink: one row per step, with the step number, its end time and the
// chosen metric keys, appended to OUT_DIR/steps.csv (or the path setting's file), for a
// spreadsheet or a plotting script.
package csvfile

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
)

// Type is the csv sink's entry in the sink registry.
var Type = sink.NewType(parse, open, sink.Caps{})

var _ sink.Sink = (*Writer)(nil)

// Settings are what a csv entry of sinks: may set.
type Settings struct {
	// Keys are the metric keys of the columns after step and end, e.g.
	// [vllm/prefix_cache_hit_rate, vllm/num_preemptions]; a step without a key has an empty cell.
	Keys []string `yaml:"keys"`
	// Path is the file; default OUT_DIR/steps.csv. An existing file is appended to.
	Path string `yaml:"path"`
}

func (Settings) UnknownKey() string { return "unknown setting of a csv sink: the settings are" }

func (Settings) YAMLExample() string { return "{type: csv, keys: [vllm/prefix_cache_hit_rate]}" }

func parse(e sink.Env, spec config.SinkSpec) (Settings, error) {
	s := Settings{Path: filepath.Join(e.OutDir, "steps.csv")}
	at, es := spec.Decode(&s)
	if len(s.Keys) == 0 && !at.Has("keys") {
		es = append(es, at.Problem("keys", "missing: the metric keys of the columns, e.g. [vllm/prefix_cache_hit_rate]"))
	}
	if s.Path == "" {
		es = append(es, at.NotAllowed("path", s.Path, "must be a file path (default OUT_DIR/steps.csv)"))
	}
	return s, spec.Problems(es)
}

// Writer appends one row per step, each row whole or not at all (a failed write is cut back
// before the retry).
type Writer struct {
	f    *sink.RecordFile
	keys []string
}

func open(_ sink.Env, set Settings) (sink.Sink, error) {
	if err := os.MkdirAll(filepath.Dir(set.Path), 0o755); err != nil {
		return nil, fmt.Errorf("create csv directory: %w", err)
	}
	f, err := os.OpenFile(set.Path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open csv file: %w", err)
	}
	rf, err := sink.NewRecordFile(f, set.Path)
	if err == nil && rf.Size() == 0 {
		err = rf.Append(row(append([]string{"step", "end"}, set.Keys...)))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Writer{f: rf, keys: set.Keys}, nil
}

// Write appends r's row. The record is shared and only read.
func (w *Writer) Write(_ context.Context, r *step.Record) error {
	cells := []string{strconv.FormatInt(r.Step, 10), r.End.UTC().Format(time.RFC3339Nano)}
	for _, k := range w.keys {
		v, ok := r.Metrics[k]
		if !ok {
			cells = append(cells, "")
			continue
		}
		cells = append(cells, strconv.FormatFloat(v, 'g', -1, 64))
	}
	return w.f.Append(row(cells))
}

// Close closes the file.
func (w *Writer) Close(context.Context) error { return w.f.Close() }

func row(cells []string) []byte {
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	cw.Write(cells)
	cw.Flush()
	return b.Bytes()
}
