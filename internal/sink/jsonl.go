package sink

import (
	"bytes"
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
// line (see RecordFile); the record and those after it wait in memory, in order, and are written
// before the next one at each step close and at Close. Losing a record is never silent: Close
// returns an error naming every step not written. It is not safe for concurrent use: the
// collector goroutine owns it; Stats may be read from anywhere.
type JSONL struct {
	rf      *RecordFile
	path    string
	opt     JSONLOptions
	pending []pendingLine
	bytes   int     // of pending
	lost    []int64 // steps given up
	failing bool    // the last write failed
	dropped bool    // the memory bound was hit during this failing episode
	lastErr error
	stats   Stats
}

type pendingLine struct {
	step int64
	b    []byte
}

// OpenJSONL opens path for appending, creating its directory. A last line left partial by a
// run killed in the middle of a write is cut off (and logged with its size) so that the next
// record starts a line of its own; a last line that is a whole JSON value without its newline
// gets the newline instead.
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
func NewJSONL(f File, name string, opt JSONLOptions) (*JSONL, error) {
	rf, err := NewRecordFile(f, name)
	if err != nil {
		return nil, err
	}
	return &JSONL{rf: rf, path: name, opt: opt.withDefaults()}, nil
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

// repairTail makes f end with a newline (or be empty), cutting off a partial last line.
func repairTail(f *os.File, path string, log *slog.Logger) error {
	tail, err := lastLine(f)
	if err != nil {
		return fmt.Errorf("read the end of %q: %w", path, err)
	}
	if len(tail) == 0 {
		return nil
	}
	if json.Valid(tail) {
		if _, err := f.Write([]byte("\n")); err != nil {
			return fmt.Errorf("end the last line of %q: %w", path, err)
		}
		log.Warn("steps file's last line had no newline; added it", "path", path)
		return nil
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("read the end of %q: %w", path, err)
	}
	if err := f.Truncate(size - int64(len(tail))); err != nil {
		return fmt.Errorf("cut the partial last line off %q: %w", path, err)
	}
	log.Warn("steps file ended with a partial line (a run stopped in the middle of a write); cut it off", "path", path, "bytes", len(tail))
	return nil
}

// lastLine returns the bytes after f's last newline.
func lastLine(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	end := st.Size()
	var tail []byte
	for end > 0 {
		n := min(end, 64<<10)
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, end-n); err != nil {
			return nil, err
		}
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			return append(buf[i+1:], tail...), nil
		}
		tail = append(buf, tail...)
		end -= n
	}
	return tail, nil
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
	j.flush() // the records waiting go first, and may make room
	if len(j.pending) > 0 && j.bytes+len(b) > j.opt.MaxPending {
		j.lost = append(j.lost, r.Step)
		j.stats.Dropped.Add(1)
		if !j.dropped {
			j.dropped = true
			j.opt.Logger.Error("steps waiting for the steps file exceed the memory bound; dropping steps until it accepts writes", "path", j.path, "step", r.Step, "waiting", len(j.pending))
		}
		return nil
	}
	j.pending = append(j.pending, pendingLine{r.Step, b})
	j.bytes += len(b)
	j.stats.Queued.Add(1)
	if len(j.pending) == 1 { // the file took every earlier record: try this one too
		j.flush()
	}
	return nil
}

// flush writes the waiting records in order until one fails.
func (j *JSONL) flush() {
	for len(j.pending) > 0 {
		p := j.pending[0]
		if err := j.rf.Append(p.b); err != nil {
			j.stats.Errors.Add(1)
			j.lastErr = err
			if !j.failing {
				j.failing = true
				j.opt.Logger.Error("steps file write failed; keeping steps in memory and retrying at each step close", "path", j.path, "step", p.step, "err", err)
			}
			return
		}
		j.pending[0] = pendingLine{}
		j.pending = j.pending[1:]
		j.bytes -= len(p.b)
		j.stats.Queued.Add(-1)
		j.stats.Written.Add(1)
		if j.failing {
			j.failing, j.dropped = false, false
			j.opt.Logger.Info("steps file recovered; writing the steps kept in memory", "path", j.path, "step", p.step, "waiting", len(j.pending))
		}
	}
}

// Close writes the records still waiting and closes the file. It returns an error naming every
// step that did not reach the file.
func (j *JSONL) Close(context.Context) error {
	j.flush()
	for _, p := range j.pending {
		j.lost = append(j.lost, p.step)
	}
	j.stats.Dropped.Add(int64(len(j.pending)))
	j.stats.Queued.Add(-int64(len(j.pending)))
	j.pending = nil
	err := j.rf.Close()
	if len(j.lost) > 0 {
		lost := fmt.Errorf("%d steps not written to %q: %s", len(j.lost), j.path, Ranges(j.lost))
		if j.lastErr != nil {
			lost = fmt.Errorf("%w (last error: %w)", lost, j.lastErr)
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
