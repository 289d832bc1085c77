// Package wandb writes closed steps as a W&B offline run, natively: the run's transaction log
// (run-<id>.wandb) with hand-encoded wandb_internal.Record protos in W&B's LevelDB-log framing,
// and the step's plots as media files beside it. `wandb sync` uploads the run later; nothing
// here talks to W&B.
package wandb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
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
var errClosed = errors.New("wandb sink is closed")

// Writer writes one offline run. Records are numbered from 1 as W&B numbers them. The Run
// record is written with the first step, so that its start time is the first step's start
// (a replay of an old recording then gets the run times of the recording); a run without
// steps gets it at Close. A run that continues an out_dir's steps writes a new offline instance
// of the W&B run found there (see previous.go).
type Writer struct {
	log     *slog.Logger
	outDir  string
	prefix  string // the run's metric prefix, to name phase keys
	set     Settings
	keys    *keyset.Set // the keys logged; nil: every key
	runDir  string
	path    string
	created time.Time
	host    string
	prev    *previous     // the instance this one continues, nil for a new run
	offset  time.Duration // the run's runtime before this instance, which _runtime goes on from

	mu      sync.Mutex
	f       *appendlog.Log // its Size is the log offset of the next chunk
	closed  bool
	num     int64 // number of the last record written
	started bool  // the Run record is written
	start   time.Time
	summary []item // the last step's values, the run's summary at Close
	lastEnd time.Time
}

// New creates OUT_DIR/wandb/offline-run-<YYYYMMDD_HHMMSS>-<id>/run-<id>.wandb and writes its
// header. spec's settings are decoded strictly: project (default "vllmstat"), entity, group,
// name, run_id (default 8 random characters), config (a mapping), images (default true) and
// per_worker (default false). Phases are logged under the default metric prefix; a run's own
// prefix, and whether it continues an out_dir, come with the sink.Env of Type.
func New(outDir string, spec config.SinkSpec, log *slog.Logger) (*Writer, error) {
	return open(outDir, spec, log, time.Now())
}

func open(outDir string, spec config.SinkSpec, log *slog.Logger, now time.Time) (*Writer, error) {
	set, err := decodeSettings(spec)
	if err != nil {
		return nil, err
	}
	return openSettings(sink.Env{OutDir: outDir, Logger: log}, set, now)
}

// openSettings is open with the settings decoded, for the run described by env. A run that
// continues the out_dir's steps continues the latest W&B run this sink wrote there (of
// run_id, when the settings give one): its id, and an instance directory of its own.
func openSettings(env sink.Env, set Settings, now time.Time) (*Writer, error) {
	outDir, log, prefix := env.OutDir, env.Logger, env.MetricPrefix
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if prefix == "" {
		prefix = vllm.Prefix
	}
	var prev *previous
	if env.Resume {
		id := set.RunID
		if set.drawnID {
			id = ""
		}
		var err error
		if prev, err = findPrevious(filepath.Join(outDir, "wandb"), id); err != nil {
			return nil, err
		}
		if prev != nil {
			set.RunID = prev.id
		}
	}
	runDir := filepath.Join(outDir, "wandb", instanceDir(now, set.RunID))
	if prev != nil {
		// An instance of the same second (a quick restart) is never written into: the next
		// free second names this one; W&B orders instances by their Run records' start times.
		for t := now; ; t = t.Add(time.Second) {
			runDir = filepath.Join(outDir, "wandb", instanceDir(t, set.RunID))
			if _, err := os.Lstat(runDir); err != nil {
				break // free, or unreadable: creating it says which
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(runDir, "files"), 0o755); err != nil {
		return nil, fmt.Errorf("create wandb run directory: %w", err)
	}
	path := filepath.Join(runDir, "run-"+set.RunID+".wandb")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create wandb run file (is run_id %q used twice?): %w", set.RunID, err)
	}
	rf, err := appendlog.New(f, path)
	if err == nil {
		err = rf.Append(logHeader)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	host, _ := os.Hostname()
	w := &Writer{log: log, outDir: outDir, prefix: prefix, set: set, keys: set.Settings.Compile(prefix), runDir: runDir, path: path, created: now, host: host, f: rf, prev: prev}
	if prev != nil {
		w.offset = time.Duration(prev.runtime * float64(time.Second))
		log.Info("wandb sink continues the offline run of the steps before; wandb sync appends this instance to it", "dir", runDir,
			"run_id", set.RunID, "previous", prev.dir, "runtime_s", prev.runtime)
	}
	log.Info("wandb sink writing an offline run", "dir", runDir, "project", set.Project, "run_id", set.RunID,
		"group", set.Group, "images", set.Images, "per_worker", set.PerWorker, "keys", set.Keys)
	return w, nil
}

// RunDir is the offline run's directory, the argument of `wandb sync`.
func (w *Writer) RunDir() string { return w.runDir }

// Path is the run's transaction log.
func (w *Writer) Path() string { return w.path }

// Write appends r as one History record (after the Run record for the first step, and a Files
// record for its plots), in one write, so that a failed step leaves nothing behind.
func (w *Writer) Write(ctx context.Context, r *step.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return fmt.Errorf("write step %d: %w", r.Step, errClosed)
	}
	start := w.start
	if !w.started {
		start = r.Start
	}
	r = w.keys.Record(r, w.prefix)
	values := w.values(r, start)
	images, files := w.images(r)

	var buf []byte
	num := w.num
	off := w.f.Size()
	add := func(rec []byte) {
		num++
		buf, off = appendLogRecord(buf, off, rec)
	}
	if !w.started {
		add(runRecord(num+1, w.runInfo(start, r.Step)))
	}
	if len(files) > 0 {
		add(filesRecord(num+1, files))
	}
	add(historyRecord(num+1, r.Step, append(values, images...)))
	if err := w.f.Append(buf); err != nil {
		return fmt.Errorf("write step %d: %w", r.Step, err)
	}
	w.num, w.started, w.start = num, true, start
	w.summary, w.lastEnd = values, r.End
	return nil
}

// Close writes the run's summary (the last step's values) and an Exit record with exit code 0,
// which tells wandb sync that the run ended cleanly, and closes the log.
func (w *Writer) Close(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var buf []byte
	num, off := w.num, w.f.Size()
	add := func(rec []byte) {
		num++
		buf, off = appendLogRecord(buf, off, rec)
	}
	runtime := w.offset + w.lastEnd.Sub(w.start)
	if !w.started {
		add(runRecord(num+1, w.runInfo(w.created, 0)))
		runtime = w.offset
	}
	if len(w.summary) > 0 {
		add(summaryRecord(num+1, w.summary))
	}
	add(exitRecord(num+1, 0, int32(runtime.Round(time.Second)/time.Second)))
	if err := errors.Join(w.f.Append(buf), w.f.Close()); err != nil {
		return fmt.Errorf("finish wandb run: %w", err)
	}
	w.num = num
	return nil
}

// runInfo is the Run record's content; first is the first step this instance logs, the
// starting step of a resumed one.
func (w *Writer) runInfo(start time.Time, first int64) runInfo {
	ri := runInfo{id: w.set.RunID, entity: w.set.Entity, project: w.set.Project, group: w.set.Group,
		name: w.set.Name, host: w.host, config: w.set.Config, start: start}
	if w.prev != nil {
		ri.resumed, ri.startingStep, ri.runtime = true, first, int32(w.prev.runtime)
	}
	return ri
}

// values are the step's history items: _step, _runtime and _timestamp as the W&B SDK writes
// them, then every key in order, its phases' among them ("vllm/rollout/..."), then each
// worker's keys when per_worker is on. _runtime counts from the first step's start, after the
// runtime of the instances before this one.
func (w *Writer) values(r *step.Record, start time.Time) []item {
	items := []item{
		{"_step", strconv.FormatInt(r.Step, 10)},
		{"_runtime", jsonFloat((w.offset + r.End.Sub(start)).Seconds())},
		{"_timestamp", jsonFloat(seconds(r.End))},
	}
	m := r.Scalars(w.prefix)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		items = append(items, item{k, jsonFloat(m[k])})
	}
	if w.set.PerWorker {
		for _, wr := range r.PerWorker {
			for _, k := range slices.Sorted(maps.Keys(wr.Metrics)) {
				items = append(items, item{sink.WorkerKey(k, wr.Target, wr.Engine, wr.Labels), jsonFloat(wr.Metrics[k])})
			}
		}
	}
	return items
}

// imageFile is the history value of an image, W&B's "image-file" as its SDK writes it.
type imageFile struct {
	Type   string `json:"_type"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int    `json:"size"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Format string `json:"format"`
}

// images copies the step's plots into files/media/images and returns their history items and
// run file paths. A plot that cannot be read or copied is logged and left out rather than
// failing the step: the scalars matter more, and a retry would not bring the file back.
func (w *Writer) images(r *step.Record) (items []item, files []string) {
	if !w.set.Images {
		return nil, nil
	}
	for _, p := range r.Plots {
		src := p
		if !filepath.IsAbs(src) {
			src = filepath.Join(w.outDir, p)
		}
		it, file, err := w.copyImage(src, r.Step)
		if err != nil {
			w.log.Warn("wandb sink leaves out a plot", "step", r.Step, "path", src, "err", err)
			continue
		}
		items = append(items, item{plotKey(p), it})
		files = append(files, file)
	}
	return items, files
}

func (w *Writer) copyImage(src string, stepNum int64) (value, file string, err error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return "", "", err
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return "", "", fmt.Errorf("not a PNG: %w", err)
	}
	sum := sha256.Sum256(b)
	sha := hex.EncodeToString(sum[:])
	file = path.Join("media", "images", mediaName(src, stepNum, sha))
	dst := filepath.Join(w.runDir, "files", filepath.FromSlash(file))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", "", fmt.Errorf("create media directory: %w", err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		return "", "", fmt.Errorf("copy plot: %w", err)
	}
	v, err := json.Marshal(imageFile{Type: "image-file", Path: file, SHA256: sha, Size: len(b),
		Width: cfg.Width, Height: cfg.Height, Format: "png"})
	return string(v), file, err
}
