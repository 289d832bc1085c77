package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vllmstat/vllmstat/internal/appendlog"
	"github.com/vllmstat/vllmstat/internal/step"
)

// JSONLOptions configure a JSONL.
type JSONLOptions struct {
	// MaxPending bounds the bytes of records kept in memory while the file refuses writes (a
	// full disk); a record beyond it is given up and reported at Close. Default 64 MiB.
	MaxPending int
	Logger     *slog.Logger
}

// JSONL appends each step record as one line to a file (OUT_DIR/steps.jsonl) so that a reader
// always sees whole lines in step order. A failed or short write is cut back to the last whole
// line; the record and those after it wait in memory, in order, and are written before the next
// one at each step close and at Close (see appendlog.Backlog). Losing a record is never silent:
// Close returns an error naming every step not written. It is not safe for concurrent use: the
// collector goroutine owns it; Stats may be read from anywhere.
type JSONL struct {
	file    *appendlog.Backlog[int64] // steps.jsonl, with the lines it has not taken yet and their steps
	path    string
	opt     JSONLOptions
	lost    []int64 // steps given up
	dropped bool    // the memory bound was hit during this failing episode
	stats   Stats
}

// OpenJSONL opens path for appending, creating its directory. A last line left partial by a
// run killed in the middle of a write, and a whole last line that is not JSON, are moved out of
// the file into path.corrupt-N (and logged with that name and their size) so that the next
// record starts a line of its own after a line of JSON; a last line that is a whole JSON value
// without its newline gets the newline instead.
func OpenJSONL(path string, opt JSONLOptions) (*JSONL, error) {
	opt = opt.withDefaults()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open steps file: %w", err)
	}
	if err := repairTail(f, path, opt.Logger); err != nil {
		f.Close()
		return nil, err
	}
	return NewJSONL(f, path, opt)
}

// NewJSONL appends to f, which must end with a whole line (or be empty); name is its path.
func NewJSONL(f appendlog.File, name string, opt JSONLOptions) (*JSONL, error) {
	l, err := appendlog.New(f, name)
	if err != nil {
		return nil, err
	}
	j := &JSONL{path: name, opt: opt.withDefaults()}
	j.file = appendlog.NewBacklog(l, j.opt.MaxPending, appendlog.Hooks[int64]{Wrote: j.wrote, Failed: j.failed})
	return j, nil
}

func (o JSONLOptions) withDefaults() JSONLOptions {
	if o.MaxPending <= 0 {
		o.MaxPending = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// repairTail makes f end with a whole line of JSON (or be empty). A last line that is a whole
// JSON value without its newline gets the newline. What else ends the file is taken out and
// kept in path.corrupt-N: a partial last line (a run killed in the middle of a write), and a
// whole last line that is not JSON, which no reader could take for a step and which would
// otherwise stay in the file, before every step written after it.
func repairTail(f *os.File, path string, log *slog.Logger) error {
	tail, err := appendlog.LastLine(f)
	if err != nil {
		return fmt.Errorf("read the end of %q: %w", path, err)
	}
	if len(tail) > 0 && json.Valid(tail) {
		if _, err := f.Write([]byte("\n")); err != nil {
			return fmt.Errorf("end the last line of %q: %w", path, err)
		}
		log.Warn("steps file's last line had no newline; added it", "path", path)
		return nil
	}
	line, err := appendlog.LastWholeLine(f)
	if err != nil {
		return fmt.Errorf("read the end of %q: %w", path, err)
	}
	garbage := len(line) > 0 && !json.Valid(line)
	cut := tail
	if garbage {
		cut = append(line, tail...)
	}
	if len(cut) == 0 {
		return nil
	}
	kept, err := appendlog.KeepAside(path, cut)
	if err != nil {
		return err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("read the end of %q: %w", path, err)
	}
	if err := f.Truncate(size - int64(len(cut))); err != nil {
		return fmt.Errorf("cut the broken end off %q (kept in %q): %w", path, kept, err)
	}
	if garbage {
		log.Warn("steps file's last line is not JSON, so no step; moved it out of the file", "path", path, "kept_as", kept, "bytes", len(cut))
	} else {
		log.Warn("steps file ended with a partial line (a run stopped in the middle of a write); moved it out of the file", "path", path, "kept_as", kept, "bytes", len(cut))
	}
	return nil
}

// Stats returns the counters: Queued is the records waiting in memory, Dropped those given up.
func (j *JSONL) Stats() *Stats { return &j.stats }

// Write appends r after the records still waiting, if any. A write error is not returned: the
// record waits in memory and the error is logged when the file starts failing; only a record
// that cannot be encoded is an error.
func (j *JSONL) Write(_ context.Context, r *step.Record) error {
	b, err := step.MarshalLine(r)
	if err != nil {
		return fmt.Errorf("encode step %d: %w", r.Step, err)
	}
	j.stats.Queued.Add(1) // while it is written or waits
	if !j.file.Push(b, r.Step) {
		j.stats.Queued.Add(-1)
		j.lost = append(j.lost, r.Step)
		j.stats.Dropped.Add(1)
		if !j.dropped {
			j.dropped = true
			j.opt.Logger.Error("steps waiting for the steps file exceed the memory bound; dropping steps until it accepts writes", "path", j.path, "step", r.Step, "waiting", j.file.Len())
		}
	}
	return nil
}

// wrote counts a record the file took.
func (j *JSONL) wrote(step int64, recovered bool) {
	j.stats.Queued.Add(-1)
	j.stats.Written.Add(1)
	if recovered {
		j.dropped = false
		j.opt.Logger.Info("steps file recovered; writing the steps kept in memory", "path", j.path, "step", step, "waiting", j.file.Len())
	}
}

// failed counts a write the file refused, and logs the first of a run of them.
func (j *JSONL) failed(step int64, err error, first bool) {
	j.stats.Errors.Add(1)
	if first {
		j.opt.Logger.Error("steps file write failed; keeping steps in memory and retrying at each step close", "path", j.path, "step", step, "err", err)
	}
}

// Close writes the records still waiting and closes the file. It returns an error naming every
// step that did not reach the file.
func (j *JSONL) Close(context.Context) error {
	j.file.Flush()
	left, err := j.file.Close()
	j.lost = append(j.lost, left...)
	j.stats.Dropped.Add(int64(len(left)))
	j.stats.Queued.Add(-int64(len(left)))
	if len(j.lost) > 0 {
		lost := fmt.Errorf("%d steps not written to %q: %s", len(j.lost), j.path, Ranges(j.lost))
		if last := j.file.Err(); last != nil {
			lost = fmt.Errorf("%w (last error: %w)", lost, last)
		}
		err = errors.Join(lost, err)
	}
	return err
}

// Ranges prints step numbers as "step 4" or "steps 1-3, 7, 9-10", runs of consecutive numbers
// joined.
func Ranges(steps []int64) string {
	var parts []string
	for i := 0; i < len(steps); {
		k := i
		for k+1 < len(steps) && steps[k+1] == steps[k]+1 {
			k++
		}
		s := strconv.FormatInt(steps[i], 10)
		if k > i {
			s += "-" + strconv.FormatInt(steps[k], 10)
		}
		parts = append(parts, s)
		i = k + 1
	}
	if len(steps) == 1 {
		return "step " + parts[0]
	}
	return "steps " + strings.Join(parts, ", ")
}

var (
	_ Sink = (*JSONL)(nil)
	_ Sink = (*Lazy)(nil)
)
