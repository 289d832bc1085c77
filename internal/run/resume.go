package run

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// lastStep returns the number of the last step in the steps.jsonl at path: that of the last
// whole line (one cut short by a killed run is no step) that is a step record. ok is false when
// the file does not exist or holds no step. The file is read from its end, over a growing
// window, so a long run's file costs about its last lines.
func lastStep(path string) (n int64, ok bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, false, err
	}
	size := st.Size()
	for window := int64(64 << 10); ; window *= 2 {
		window = min(window, size)
		buf := make([]byte, window)
		if _, err := f.ReadAt(buf, size-window); err != nil && err != io.EOF {
			return 0, false, fmt.Errorf("read %q: %w", path, err)
		}
		lines := bytes.Split(buf, []byte{'\n'})
		lines = lines[:len(lines)-1] // after the last newline: empty, or a line cut short
		first := 0
		if window < size {
			first = 1 // may begin before the window
		}
		for i := len(lines) - 1; i >= first; i-- {
			var rec struct {
				Step *int64 `json:"step"`
			}
			if json.Unmarshal(lines[i], &rec) == nil && rec.Step != nil {
				return *rec.Step, true, nil
			}
		}
		if window == size {
			return 0, false, nil
		}
	}
}

// openStepFile is where a run whose steps end only through the API leaves the step open at its
// exit, which the trainer never ended: not a step, so in no sink, but not thrown away either.
const openStepFile = "open-step.json"

// writeOpenStep writes rec, the step open at exit, to OUT/open-step.json (replacing the last
// run's), and says what it held.
func writeOpenStep(cfg config.Config, rec *step.Record, log *slog.Logger) {
	path := filepath.Join(cfg.OutDir, openStepFile)
	var counts []any
	for _, f := range vllm.Counters {
		if k := vllm.Key(cfg.MetricPrefix, f.Name); f.Total && f.Split == "" {
			if v, ok := rec.Metrics[k]; ok {
				counts = append(counts, k, v)
			}
		}
	}
	args := append([]any{"scrapes", rec.Scrapes.OK + rec.Scrapes.Failed, "duration_s", rec.DurationS, "file", path}, counts...)
	b, err := step.MarshalLine(rec)
	if err == nil {
		err = writeFileAtomic(path, b)
	}
	if err != nil {
		log.Error("the step open at exit (steps end only through the API, so it is no step) could not be written", append(args, "err", err)...)
		return
	}
	log.Info("the step open at exit was not ended by the trainer, so it is no step: written apart, in no sink", args...)
}

// writeFileAtomic replaces the file at path with b, so that a reader never sees half of it.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
