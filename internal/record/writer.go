package record

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/vllmstat/vllmstat/internal/appendlog"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
)

// WriterOptions configure a Writer.
type WriterOptions struct {
	// ChunkBytes of encoded events make a chunk, written as soon as it is full; a chunk is
	// also written at every step end. Default 1 MiB.
	ChunkBytes int
	// MaxPending bounds the bytes of chunks kept in memory while the file refuses writes;
	// beyond it events are dropped and a gap event marks them. Default 64 MiB.
	MaxPending int
	Logger     *slog.Logger
	// ResumeFrom is the step the run was resumed from (resume_from), written on its start
	// event; nil: not resumed.
	ResumeFrom *int64
}

func (o WriterOptions) withDefaults() WriterOptions {
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 1 << 20
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Writer appends events to a recording so that the file always holds whole events: events
// are buffered and written in chunks, each a complete gzip member in a .gz file (concatenated
// members are one valid gzip stream), and a failed or short write is cut back to the last whole
// chunk. Chunks the file refused wait in memory, in order, and are written before the next one
// (see appendlog.Backlog); a write error never stops the recording. Errors are logged when
// writing starts and stops failing, counted in Stats, and reported by Close.
//
// Not safe for concurrent use: one collector owns it; Stats may be read from anywhere.
type Writer struct {
	opt  WriterOptions
	file *appendlog.Backlog[chunk] // the recording, with the chunks it has not taken yet
	path string
	gz   bool

	cur     bytes.Buffer // encoded events of the chunk being filled
	curN    int64
	curFrom time.Time
	curTo   time.Time

	gapN           int64 // events dropped since the last chunk kept
	gapFrom, gapTo time.Time
	lost           int64 // events dropped in all
	gaps           int

	stats sink.Stats
	zbuf  bytes.Buffer
	zw    *gzip.Writer
}

// chunk is what the writer keeps with a sealed chunk to account for it.
type chunk struct {
	events   int64
	from, to time.Time
}

// Create creates the recording at path or, when path exists, its next free segment (see
// SegmentPath); Path says which. Nothing that exists is truncated.
func Create(path string, opt WriterOptions) (*Writer, error) {
	f, p, err := createSegment(path)
	if err != nil {
		return nil, err
	}
	w, err := NewWriter(f, p, opt)
	if err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// NewWriter appends events to f, which must be empty or end with a whole chunk; name is f's
// path: a name ending in .gz makes a gzip recording.
func NewWriter(f appendlog.File, name string, opt WriterOptions) (*Writer, error) {
	l, err := appendlog.New(f, name)
	if err != nil {
		return nil, err
	}
	rw := &Writer{opt: opt.withDefaults(), path: name, gz: strings.HasSuffix(name, ".gz")}
	rw.file = appendlog.NewBacklog(l, rw.opt.MaxPending, appendlog.Hooks[chunk]{Wrote: rw.wrote, Failed: rw.failed})
	return rw, nil
}

// Path is the file the writer writes: the path given to Create or a later segment of it.
func (rw *Writer) Path() string { return rw.path }

// Stats are the writer's counters, in events: Queued waiting in memory, Written, Dropped (lost
// to the memory bound or not written at Close), and Errors, the failed write attempts.
func (rw *Writer) Stats() *sink.Stats { return &rw.stats }

// Scrape records a scrape: its body when it answered, else the error.
func (rw *Writer) Scrape(ts time.Time, target string, body []byte, scrapeErr error) error {
	e := Event{Kind: KindScrape, TS: ts.UTC(), Target: target}
	if scrapeErr != nil {
		e.Error, e.Refused = scrapeErr.Error(), step.Refused(scrapeErr)
	} else {
		s := string(body)
		e.Body = &s
	}
	return rw.add(&e)
}

// StepEnd records the end of a step.
func (rw *Writer) StepEnd(ts time.Time, step int64) error {
	return rw.add(&Event{Kind: KindStep, TS: ts.UTC(), Step: step})
}

// Start records that the run began collecting, before its first scrape.
func (rw *Writer) Start(ts time.Time) error {
	return rw.add(&Event{Kind: KindStart, TS: ts.UTC(), ResumeFrom: rw.opt.ResumeFrom})
}

// PhaseEdge records that phase name started or ended (edge EdgeStart or EdgeEnd).
func (rw *Writer) PhaseEdge(ts time.Time, name, edge string) error {
	return rw.add(&Event{Kind: KindPhase, TS: ts.UTC(), Phase: name, Edge: edge})
}

// Policy records that the trainer published version v of its weights.
func (rw *Writer) Policy(ts time.Time, v int64) error {
	return rw.add(&Event{Kind: KindPolicy, TS: ts.UTC(), Version: &v})
}

// EngineVersion records what target's engine reported as its weight version: v when reports
// is set, none otherwise.
func (rw *Writer) EngineVersion(ts time.Time, target string, v int64, reports bool) error {
	e := Event{Kind: KindEngineVersion, TS: ts.UTC(), Target: target}
	if reports {
		e.Version = &v
	}
	return rw.add(&e)
}

// ServerVersion records what the server that target's router page names addr reported as its
// weight version: v when reports is set, none otherwise.
func (rw *Writer) ServerVersion(ts time.Time, target, addr string, v int64, reports bool) error {
	e := Event{Kind: KindEngineVersion, TS: ts.UTC(), Target: target, WorkerAddr: addr}
	if reports {
		e.Version = &v
	}
	return rw.add(&e)
}

// Removed records that target left the run.
func (rw *Writer) Removed(ts time.Time, target string) error {
	return rw.add(&Event{Kind: KindRemove, TS: ts.UTC(), Target: target})
}

// Added records that target was added while the run ran (see step.Tracker.Added).
func (rw *Writer) Added(ts time.Time, target string) error {
	return rw.add(&Event{Kind: KindAdd, TS: ts.UTC(), Target: target})
}

// TargetLabels records that target's labels are now labels (none: nil or empty).
func (rw *Writer) TargetLabels(ts time.Time, target string, labels map[string]string) error {
	return rw.add(&Event{Kind: KindTarget, TS: ts.UTC(), Target: target, Labels: labels})
}

// add buffers e, and writes the chunk once it is full. Only an event that cannot be encoded is
// an error; write errors are kept for Close.
func (rw *Writer) add(e *Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", e.Kind, err)
	}
	if rw.curN == 0 {
		rw.curFrom = e.TS
	}
	rw.curTo = e.TS
	rw.cur.Write(b)
	rw.cur.WriteByte('\n')
	rw.curN++
	rw.stats.Queued.Add(1)
	if rw.cur.Len() >= rw.opt.ChunkBytes {
		rw.write()
	}
	return nil
}

// write seals cur into a chunk and writes it after the chunks waiting (see
// appendlog.Backlog.Push); with nothing to seal, it writes the chunks waiting.
func (rw *Writer) write() {
	if rw.curN > 0 || rw.gapN > 0 {
		rw.seal()
	} else {
		rw.file.Flush()
	}
}

// Flush writes the events buffered so far as a chunk, after any chunks still waiting; the
// collector calls it at every step end. A write error is not returned (see Writer).
func (rw *Writer) Flush() error {
	if rw.curN > 0 {
		rw.write()
	} else {
		rw.file.Flush()
	}
	return nil
}

// seal turns cur into a chunk for the file, preceded by a gap event if events were dropped just
// before it, or drops it when waiting chunks already fill the memory bound.
func (rw *Writer) seal() {
	to := rw.curTo
	if rw.curN == 0 { // only a gap event to write
		to = rw.gapTo
	}
	data := rw.cur.Bytes()
	if rw.gapN > 0 {
		g, _ := json.Marshal(Event{Kind: KindGap, TS: rw.gapTo, Since: rw.gapFrom, Events: rw.gapN})
		data = append(append(g, '\n'), data...)
	}
	c := chunk{events: rw.curN, from: rw.curFrom, to: to}
	if rw.file.Push(rw.encode(data), c) {
		rw.gapN = 0
	} else {
		if rw.gapN == 0 {
			rw.gaps++
			rw.gapFrom = rw.curFrom
			rw.opt.Logger.Error("recording's waiting events exceed the memory bound; dropping events until its file accepts writes (a gap event will mark them)",
				"path", rw.path, "waiting_bytes", rw.file.Bytes())
		}
		rw.gapN += rw.curN
		rw.gapTo = to
		rw.lost += rw.curN
		rw.stats.Dropped.Add(rw.curN)
		rw.stats.Queued.Add(-rw.curN)
	}
	rw.cur.Reset()
	rw.curN = 0
}

// encode is the chunk of data as it goes to the file: a gzip member for .gz recordings.
func (rw *Writer) encode(data []byte) []byte {
	if !rw.gz {
		return bytes.Clone(data)
	}
	rw.zbuf.Reset()
	if rw.zw == nil {
		rw.zw = gzip.NewWriter(&rw.zbuf)
	} else {
		rw.zw.Reset(&rw.zbuf)
	}
	rw.zw.Write(data) // writes to a bytes.Buffer do not fail
	rw.zw.Close()
	return bytes.Clone(rw.zbuf.Bytes())
}

// wrote counts a chunk the file took.
func (rw *Writer) wrote(c chunk, recovered bool) {
	rw.stats.Written.Add(c.events)
	rw.stats.Queued.Add(-c.events)
	if recovered {
		rw.opt.Logger.Info("recording recovered; writing the events kept in memory", "path", rw.path, "waiting_chunks", rw.file.Len())
	}
}

// failed counts a write the file refused, and logs the first of a run of them.
func (rw *Writer) failed(_ chunk, err error, first bool) {
	rw.stats.Errors.Add(1)
	if first {
		rw.opt.Logger.Error("recording write failed; keeping its events in memory and retrying at each step end", "path", rw.path, "err", err)
	}
}

// Close writes everything still buffered or waiting (and a gap event for events dropped at the
// end) and closes the file. It returns an error when events could not be written or were
// dropped during the run, saying how many and when.
func (rw *Writer) Close() error {
	rw.write()
	left, cerr := rw.file.Close()
	var n int64
	for _, c := range left {
		n += c.events
	}
	var errs []error
	if n > 0 {
		first, last := left[0].from, left[len(left)-1].to
		errs = append(errs, fmt.Errorf("recording %q: %d events from %s to %s not written: %w", rw.path, n,
			first.Format(TimeFormat), last.Format(TimeFormat), rw.file.Err()))
		rw.stats.Dropped.Add(n)
	}
	if rw.lost > 0 {
		errs = append(errs, fmt.Errorf("recording %q lost %d events in %d gaps while its file refused writes", rw.path, rw.lost, rw.gaps))
	}
	rw.stats.Queued.Store(0)
	if cerr != nil {
		errs = append(errs, cerr)
	}
	return errors.Join(errs...)
}
