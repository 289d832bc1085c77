package record

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// DefaultMaxLine bounds a line of a recording, decompressed: a page up to the default
// max_body_bytes (16 MiB) escaped as JSON, with room to spare. A longer line is an error, so
// that a hostile file (a gzip bomb) cannot take the reader's memory.
const DefaultMaxLine = 64 << 20

// ErrLineTooLong is returned for a line longer than the reader's limit.
var ErrLineTooLong = errors.New("line longer than the limit")

// Reader reads one segment of a recording event by event.
type Reader struct {
	ctx      context.Context
	sc       *bufio.Scanner
	max      int
	line     int
	noEOL    bool // the last line scanned had no newline: the end of the input
	lastTS   time.Time
	lastLine int
	startErr error // a gzip header cut short: reported by the first Next
	c        io.Closer
	read     *countReader               // the file's bytes read so far; nil for a reader not from a file
	Warn     func(line int, msg string) // called for skipped lines and a cut-short end; may be nil
}

// Open opens the recording file at path.
func Open(path string) (*Reader, error) { return OpenContext(context.Background(), path, 0) }

// OpenContext opens the recording file at path; reading fails once ctx ends. maxLine bounds a
// decompressed line (0: DefaultMaxLine).
func OpenContext(ctx context.Context, path string, maxLine int) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open recording: %w", err)
	}
	cr := &countReader{r: f}
	var in io.Reader = ctxReader{ctx, cr}
	var startErr error
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(in)
		switch {
		case err == nil:
			in = gz
		case errors.Is(err, io.EOF):
			in = strings.NewReader("") // an empty file: a run that wrote nothing yet
		case errors.Is(err, io.ErrUnexpectedEOF):
			in, startErr = strings.NewReader(""), err
		default:
			f.Close()
			return nil, fmt.Errorf("open recording %q: %w", path, err)
		}
	}
	r := NewReaderContext(ctx, in, maxLine)
	r.c, r.startErr, r.read = f, startErr, cr
	return r, nil
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Offset is how many bytes of the file (as stored: compressed for a .gz file) were read so far,
// for a reader made by Open or OpenContext; 0 otherwise.
func (r *Reader) Offset() int64 {
	if r.read == nil {
		return 0
	}
	return r.read.n
}

// NewReader reads a recording from r.
func NewReader(r io.Reader) *Reader { return NewReaderContext(context.Background(), r, 0) }

// NewReaderContext reads a recording from r until ctx ends, with lines of at most maxLine bytes
// (0: DefaultMaxLine).
func NewReaderContext(ctx context.Context, r io.Reader, maxLine int) *Reader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	rd := &Reader{ctx: ctx, max: maxLine}
	rd.sc = bufio.NewScanner(ctxReader{ctx, r})
	rd.sc.Buffer(make([]byte, 0, min(64<<10, maxLine+1)), maxLine+1) // +1: the newline
	rd.sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		rd.noEOL = tok != nil && atEOF && bytes.IndexByte(data[:adv], '\n') < 0
		return adv, tok, err
	})
	return rd
}

// ctxReader fails reads once ctx ends, so that a reader stuck in a long input stops.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Close closes the underlying file, if any.
func (r *Reader) Close() error {
	if r.c != nil {
		return r.c.Close()
	}
	return nil
}

func (r *Reader) warn(line int, msg string) {
	if r.Warn != nil {
		r.Warn(line, msg)
	}
}

// Next returns the next event, io.EOF at the end, or an error naming the line for a line that
// is not valid JSON, longer than the limit, a scrape without a target, an event without ts, or
// an event earlier than the one before it (a recording is in time order: replaying it
// otherwise would compute wrong increases). Lines of an unknown kind are skipped with a
// warning. An input cut short (a run killed in the middle of a write: a partial last line or
// a truncated gzip member) ends with a warning, not an error.
func (r *Reader) Next() (*Event, error) {
	if r.startErr != nil {
		r.startErr = nil
		r.warn(1, "recording is cut short inside its first gzip header (was its run killed?); it holds no events")
		return nil, io.EOF
	}
	for {
		if err := r.ctx.Err(); err != nil {
			return nil, fmt.Errorf("line %d: %w", r.line+1, err)
		}
		if !r.sc.Scan() {
			break
		}
		r.line++
		b := r.sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(b, &e); err != nil {
			if r.noEOL {
				r.warn(r.line, fmt.Sprintf("last line is cut short (%d bytes without a newline; was its run killed?); reading stops here", len(b)))
				return nil, io.EOF
			}
			return nil, fmt.Errorf("line %d: not a valid event: %v", r.line, err)
		}
		switch e.Kind {
		case KindScrape:
			if e.Target == "" {
				return nil, fmt.Errorf("line %d: scrape without target", r.line)
			}
			if e.Body == nil && e.Error == "" {
				e.Error = "recorded without body or error"
			}
		case KindRemove, KindTarget, KindAdd, KindEngineVersion:
			if e.Target == "" {
				return nil, fmt.Errorf("line %d: %s event without a target", r.line, e.Kind)
			}
		case KindPhase:
			if e.Phase == "" || e.Edge != EdgeStart && e.Edge != EdgeEnd {
				return nil, fmt.Errorf("line %d: phase event needs a phase and an edge %q or %q", r.line, EdgeStart, EdgeEnd)
			}
		case KindPolicy:
			if e.Version == nil {
				return nil, fmt.Errorf("line %d: policy event without a version", r.line)
			}
		case KindStep, KindGap, KindStart:
		default:
			r.warn(r.line, fmt.Sprintf("skipping event of unknown kind %q", e.Kind))
			continue
		}
		if e.TS.IsZero() {
			return nil, fmt.Errorf("line %d: event without ts", r.line)
		}
		if e.TS.Before(r.lastTS) {
			return nil, fmt.Errorf("line %d: ts %s is earlier than ts %s of line %d: a recording must be in time order",
				r.line, e.TS.Format(TimeFormat), r.lastTS.Format(TimeFormat), r.lastLine)
		}
		r.lastTS, r.lastLine = e.TS, r.line
		return &e, nil
	}
	err := r.sc.Err()
	switch {
	case err == nil:
		return nil, io.EOF
	case errors.Is(err, bufio.ErrTooLong):
		return nil, fmt.Errorf("line %d: %w of %d bytes", r.line+1, ErrLineTooLong, r.max)
	case errors.Is(err, io.ErrUnexpectedEOF):
		r.warn(r.line+1, "recording ends inside a gzip member (was its run killed?); reading stops here")
		return nil, io.EOF
	}
	return nil, fmt.Errorf("line %d: %w", r.line+1, err)
}

// Line is the number of the line last read.
func (r *Reader) Line() int { return r.line }
