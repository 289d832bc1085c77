// Package record reads and writes recordings: everything the scraper saw, as JSON Lines (gzip
// when the file name ends in .gz), so that replay can recompute the step records.
//
// The format is fixed; other tools produce and read it:
//
//	{"kind":"scrape","ts":"…","target":"http://h:8000/metrics","body":"<exposition text>"}
//	{"kind":"scrape","ts":"…","target":"…","error":"<why>"}
//	{"kind":"step","ts":"…","step":12}
package record

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Event is one line of a recording.
type Event struct {
	Kind   string    `json:"kind"`
	TS     time.Time `json:"ts"`
	Target string    `json:"target,omitempty"`
	Body   *string   `json:"body,omitempty"`
	Error  string    `json:"error,omitempty"`
	Step   int64     `json:"step,omitempty"`
}

// TimeFormat is how ts is written: RFC 3339 in UTC, always with nine fractional digits, so that
// replay gets back the exact nanosecond the collector used.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// MarshalJSON writes ts in TimeFormat.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	return json.Marshal(struct {
		plain
		TS string `json:"ts"`
	}{plain(e), e.TS.UTC().Format(TimeFormat)})
}

// Kinds of events.
const (
	KindScrape = "scrape"
	KindStep   = "step"
)

// Writer appends events to a recording. Not safe for concurrent use: one collector owns it.
type Writer struct {
	f  *os.File
	gz *gzip.Writer
	w  *bufio.Writer
}

// Create creates (truncates) the recording at path.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create recording: %w", err)
	}
	rw := &Writer{f: f}
	var out io.Writer = f
	if strings.HasSuffix(path, ".gz") {
		rw.gz = gzip.NewWriter(f)
		out = rw.gz
	}
	rw.w = bufio.NewWriterSize(out, 256<<10)
	return rw, nil
}

// Scrape records a scrape: its body when it answered, else the error.
func (rw *Writer) Scrape(ts time.Time, target string, body []byte, scrapeErr error) error {
	e := Event{Kind: KindScrape, TS: ts.UTC(), Target: target}
	if scrapeErr != nil {
		e.Error = scrapeErr.Error()
	} else {
		s := string(body)
		e.Body = &s
	}
	return rw.write(&e)
}

// StepEnd records the end of a step.
func (rw *Writer) StepEnd(ts time.Time, step int64) error {
	return rw.write(&Event{Kind: KindStep, TS: ts.UTC(), Step: step})
}

func (rw *Writer) write(e *Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = rw.w.Write(b)
	return err
}

// Flush pushes buffered events to the file (a gzip stream is flushed to a block boundary, so
// a reader of the file so far sees every event).
func (rw *Writer) Flush() error {
	if err := rw.w.Flush(); err != nil {
		return err
	}
	if rw.gz != nil {
		return rw.gz.Flush()
	}
	return nil
}

// Close flushes and closes the recording.
func (rw *Writer) Close() error {
	err := rw.w.Flush()
	if rw.gz != nil {
		err = errors.Join(err, rw.gz.Close())
	}
	return errors.Join(err, rw.f.Close())
}

// Reader reads a recording event by event.
type Reader struct {
	sc   *bufio.Scanner
	line int
	c    io.Closer
	Warn func(line int, msg string) // called for skipped lines; may be nil
}

// Open opens the recording at path.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open recording: %w", err)
	}
	var in io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("open recording %q: %w", path, err)
		}
		in = gz
	}
	r := NewReader(in)
	r.c = f
	return r, nil
}

// NewReader reads a recording from r.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 256<<20) // a line holds a whole page
	return &Reader{sc: sc}
}

// Close closes the underlying file, if any.
func (r *Reader) Close() error {
	if r.c != nil {
		return r.c.Close()
	}
	return nil
}

// Next returns the next event, io.EOF at the end, or an error naming the line for a line that is
// not valid JSON or a scrape without a target. Lines of an unknown kind are skipped with a warning.
func (r *Reader) Next() (*Event, error) {
	for r.sc.Scan() {
		r.line++
		b := r.sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(b, &e); err != nil {
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
		case KindStep:
		default:
			if r.Warn != nil {
				r.Warn(r.line, fmt.Sprintf("skipping event of unknown kind %q", e.Kind))
			}
			continue
		}
		if e.TS.IsZero() {
			return nil, fmt.Errorf("line %d: event without ts", r.line)
		}
		return &e, nil
	}
	if err := r.sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", r.line+1, err)
	}
	return nil, io.EOF
}

// Line is the number of the line last read.
func (r *Reader) Line() int { return r.line }
