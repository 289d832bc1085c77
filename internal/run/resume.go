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
	"strconv"

	"github.com/vllmstat/vllmstat/internal/collector"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// lastResumable is the last step a run can continue after: a step number is at most
// collector.MaxStep (2^53), so after that one there is none to write.
const lastResumable = collector.MaxStep - 1

// lastStep returns the number of the last step in the steps.jsonl at path: that of the last
// whole line (one cut short by a killed run is no step) that is a step record, a JSON object
// with a "step" that is not null. Other lines ({}, null, a note) are passed over. ok is false
// when the file does not exist or holds no step. A last step that no run can continue after
// (not a whole number, negative, 2^53 or more) is an error naming its line: continuing after
// 1e18 would refuse every step, after -5 write steps 1, 2 and 3 again. The file is read from
// its end, over a growing window, so a long run's file costs about its last lines.
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
		// Lines from the last newline back; what follows it is empty, or a line cut short.
		for end := bytes.LastIndexByte(buf, '\n'); end >= 0; {
			start := bytes.LastIndexByte(buf[:end], '\n') + 1
			if start == 0 && window < size {
				break // may begin before the window
			}
			var rec struct {
				Step json.RawMessage `json:"step"`
			}
			if json.Unmarshal(buf[start:end], &rec) == nil && len(rec.Step) > 0 && string(rec.Step) != "null" {
				n, err := strconv.ParseInt(string(rec.Step), 10, 64)
				if err != nil || n < 0 || n > lastResumable {
					return 0, false, badLastStep(f, path, size-window+int64(start), rec.Step)
				}
				return n, true, nil
			}
			end = start - 1
		}
		if window == size {
			return 0, false, nil
		}
	}
}

// badLastStep is the error of a last step record at offset off whose step no run can continue
// after: it names the line and says what to do.
func badLastStep(f *os.File, path string, off int64, step json.RawMessage) error {
	shown := string(step)
	if len(shown) > 40 {
		shown = shown[:40] + "…"
	}
	line, err := lineNumber(f, off)
	if err != nil {
		return fmt.Errorf("read %q: %w", path, err)
	}
	return fmt.Errorf("cannot continue the steps of %q: its last step record, line %d, has step %s, and a run continues only after a whole number from 0 to %d (below 2^53); fix or delete that line, or start the run on another out_dir",
		path, line, shown, lastResumable)
}

// lineNumber is the number, from 1, of the line that starts at offset off of f.
func lineNumber(f *os.File, off int64) (int64, error) {
	n := int64(1)
	buf := make([]byte, 64<<10)
	for pos := int64(0); pos < off; {
		k, err := f.ReadAt(buf[:min(int64(len(buf)), off-pos)], pos)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		pos += int64(k)
		if err != nil && (err != io.EOF || pos < off) {
			return 0, err
		}
	}
	return n, nil
}

// heldStep is the last step that a sink's files hold already.
type heldStep struct {
	sinkType string // the sink's type
	sink.Held
}

// sinkSteps reads the last step that each planned sink's files hold already (see
// sink.StepKeeper), and refuses one that no run can continue after, naming the file.
func sinkSteps(planned []plannedSink) ([]heldStep, error) {
	var held []heldStep
	for _, ps := range planned {
		h, ok, err := ps.p.LastStep()
		if err != nil {
			return nil, fmt.Errorf("%s sink (%s): %w", ps.spec.Type, ps.spec.Path, err)
		}
		if !ok {
			continue
		}
		if h.Step < 0 || h.Step > lastResumable {
			return nil, fmt.Errorf("cannot continue the steps of the out_dir: %q, of the %s sink, ends at step %d, and a run continues only after a whole number from 0 to %d (below 2^53); move that file away, or start the run on another out_dir",
				h.File, ps.spec.Type, h.Step, lastResumable)
		}
		held = append(held, heldStep{ps.spec.Type, h})
	}
	return held, nil
}

// continueAfterSinks is where the run's steps go on from, given steps.jsonl's last step (after,
// resume) and those the sinks' files hold: after the last of them all. A run on an out_dir
// whose steps.jsonl was deleted, or holds fewer steps than the trackers, would otherwise write
// their step numbers again (steps.csv 1, 2, 3, 1, 2; a second TensorBoard file of steps 1 and
// 2), and a trainer resuming at step 4 expects end_step(4) to work. Each file that holds a step
// past steps.jsonl's is named in the log.
func continueAfterSinks(held []heldStep, stepsPath string, after int64, resume bool, log *slog.Logger) (int64, bool) {
	last, cont := after, resume
	for _, h := range held {
		if resume && h.Step <= after {
			continue
		}
		args := []any{"sink", h.sinkType, "file", h.File, "last_step", h.Step, "steps", stepsPath}
		if resume {
			args = append(args, "steps_last_step", after)
		} else {
			args = append(args, "steps_last_step", "none")
		}
		log.Warn("a sink's file holds steps that steps.jsonl does not: the run continues after the last step of them all, so that no step number is written twice", args...)
		if !cont || h.Step > last {
			last, cont = h.Step, true
		}
	}
	return last, cont
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
