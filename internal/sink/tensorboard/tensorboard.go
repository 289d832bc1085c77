// Package tensorboard writes closed steps to a TensorBoard event file, natively: TFRecord
// framing around hand-encoded Event protos, one event per step with a scalar per metric key
// and, when plots are on, the step's PNG plots as image summaries. TensorBoard and W&B's
// sync_tensorboard read the file while it grows.
package tensorboard

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vllmstat/vllmstat/internal/appendlog"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/keyset"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// errClosed is returned by Write after Close.
var errClosed = errors.New("tensorboard sink is closed")

// Writer appends steps to one event file. Each step is one write of whole records with no
// buffering in between, so a live TensorBoard sees a step as soon as Write returns.
//
// A run that continues an out_dir's steps writes a new event file into the same directory:
// TensorBoard reads all the event files of a directory as one run, in the order of their names,
// and the steps go on from the earlier file's. The new file's name sorts after every event file
// already there (see create), even when the clock went back, as TensorBoard would otherwise
// read it first, or, while it follows the directory, not at all.
type Writer struct {
	log    *slog.Logger
	outDir string
	prefix string // the run's metric prefix, to name phase keys
	set    Settings
	keys   *keyset.Set // the scalars written; nil: every key
	path   string

	mu     sync.Mutex
	f      *appendlog.Log
	closed bool
}

// New creates OUT_DIR/tensorboard/events.out.tfevents.<unix>.<host> (or the dir setting's
// directory) and writes its file-version event. spec's settings are decoded strictly: images
// (default true), per_worker (default false) and dir.
// Phases are logged under the default metric prefix (see sink.Env.MetricPrefix for a run's own).
func New(outDir string, spec config.SinkSpec, log *slog.Logger) (*Writer, error) {
	return open(outDir, spec, log, time.Now())
}

func open(outDir string, spec config.SinkSpec, log *slog.Logger, now time.Time) (*Writer, error) {
	set, err := decodeSettings(outDir, spec)
	if err != nil {
		return nil, err
	}
	return openSettings(sink.Env{OutDir: outDir, Logger: log}, set, now)
}

// openSettings is open with the settings decoded, for the run described by env.
func openSettings(env sink.Env, set Settings, now time.Time) (*Writer, error) {
	outDir, log, prefix := env.OutDir, env.Logger, env.MetricPrefix
	if prefix == "" {
		prefix = vllm.Prefix
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(set.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create tensorboard directory: %w", err)
	}
	f, path, err := create(set.Dir, now)
	if err != nil {
		return nil, err
	}
	rf, err := appendlog.New(f, path)
	if err == nil {
		err = rf.Append(appendRecord(nil, versionEvent(wallTime(now))))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	w := &Writer{log: log, outDir: outDir, prefix: prefix, set: set, keys: set.Settings.Compile(prefix), path: path, f: rf}
	log.Info("tensorboard sink writing", "path", path, "images", set.Images, "per_worker", set.PerWorker, "keys", set.Keys)
	return w, nil
}

// create makes a new event file named the way TensorFlow names them. A file of the same
// second and host is never appended to: a second writer gets a numbered name instead. The name
// sorts after those of the event files already in dir: when one of them is of a later second
// (the clock went back, or another host's clock is ahead), the new name takes the second after
// the latest, since TensorBoard reads a directory's files in the order of their names.
func create(dir string, now time.Time) (*os.File, string, error) {
	unix := now.Unix()
	last, err := lastEventFile(dir)
	if err != nil {
		return nil, "", err
	}
	name := func(unix int64) string { return fmt.Sprintf("events.out.tfevents.%d.%s", unix, hostname()) }
	// Our own file of this second is followed by a numbered one, which sorts after it.
	if own := name(unix); last > own && !strings.HasPrefix(last, own+".") {
		if sec, ok := eventFileSecond(last); ok && sec >= unix {
			unix = sec + 1
		}
	}
	base := filepath.Join(dir, name(unix))
	for i := 0; ; i++ {
		p := base
		if i > 0 {
			p += "." + strconv.Itoa(i)
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) && i < 100 {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("create event file: %w", err)
		}
		return f, p, nil
	}
}

// lastEventFile is the name of dir's event file that sorts last, "" when it has none.
func lastEventFile(dir string) (string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if err != nil {
		return "", fmt.Errorf("list event files: %w", err)
	}
	if len(names) == 0 {
		return "", nil
	}
	return filepath.Base(slices.Max(names)), nil
}

// eventFileSecond is the Unix second in an event file's name.
func eventFileSecond(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, "events.out.tfevents.")
	if !ok {
		return 0, false
	}
	sec, _, _ := strings.Cut(rest, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	return n, err == nil
}

// hostname is the host part of the file name, reduced to characters safe in a file name.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' {
			return r
		}
		return '_'
	}, h)
}

// Path is the event file being written.
func (w *Writer) Path() string { return w.path }

// Write appends r as one event: step = r.Step, wall_time = r.End.
func (w *Writer) Write(ctx context.Context, r *step.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r = w.keys.Record(r, w.prefix)
	ev := summaryEvent(wallTime(r.End), r.Step, w.scalars(r), w.pictures(r))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("write step %d: %w", r.Step, errClosed)
	}
	if err := w.f.Append(appendRecord(nil, ev)); err != nil {
		return fmt.Errorf("write step %d: %w", r.Step, err)
	}
	return nil
}

// Close closes the file; later writes fail.
func (w *Writer) Close(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.f.Close()
}

// scalars lists the step's keys in order, its phases' among them ("vllm/rollout/..."), then
// each worker's when per_worker is on.
func (w *Writer) scalars(r *step.Record) []scalar {
	m := r.Scalars(w.prefix)
	out := make([]scalar, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, scalar{k, m[k]})
	}
	if !w.set.PerWorker {
		return out
	}
	for _, wr := range r.PerWorker {
		for _, k := range slices.Sorted(maps.Keys(wr.Metrics)) {
			out = append(out, scalar{sink.WorkerKey(k, wr.Target, wr.Engine, wr.Labels), wr.Metrics[k]})
		}
	}
	return out
}

// pictures reads the step's plots. A plot that cannot be read is logged and left out rather
// than failing the step: the scalars matter more, and a retry would not bring the file back.
func (w *Writer) pictures(r *step.Record) []picture {
	if !w.set.Images {
		return nil
	}
	var out []picture
	for _, p := range r.Plots {
		path := p
		if !filepath.IsAbs(path) {
			path = filepath.Join(w.outDir, p)
		}
		b, err := os.ReadFile(path)
		if err == nil {
			var pic picture
			if pic, err = pngPicture(plotTag(p), b); err == nil {
				out = append(out, pic)
				continue
			}
		}
		w.log.Warn("tensorboard sink leaves out a plot", "step", r.Step, "path", path, "err", err)
	}
	return out
}

// wallTime is t in Unix seconds, as Event.wall_time holds it.
func wallTime(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}
