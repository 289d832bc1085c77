package sink

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vllmstat/vllmstat/internal/step"
)

// JSONL appends each step record as one line to a file (OUT_DIR/steps.jsonl).
type JSONL struct {
	f    *os.File
	path string
}

// OpenJSONL opens path for appending, creating its directory.
func OpenJSONL(path string) (*JSONL, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open steps file: %w", err)
	}
	return &JSONL{f: f, path: path}, nil
}

// Write appends r as one line, in a single write so that a reader never sees half a line.
func (j *JSONL) Write(_ context.Context, r *step.Record) error {
	b, err := step.MarshalLine(r)
	if err != nil {
		return fmt.Errorf("encode step %d: %w", r.Step, err)
	}
	if _, err := j.f.Write(b); err != nil {
		return fmt.Errorf("write %q: %w", j.path, err)
	}
	return nil
}

// Close closes the file.
func (j *JSONL) Close(context.Context) error { return j.f.Close() }
