package discovery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/target"
)

// maxFileBytes bounds a file_sd file: a path to something else (a log) must not be read whole.
const maxFileBytes = 8 << 20

// group is one entry of a file_sd file, as Prometheus defines it.
type group struct {
	Targets []string          `json:"targets" yaml:"targets"`
	Labels  map[string]string `json:"labels" yaml:"labels"`
}

// Labels of a group that shape its host:port targets' URLs, as in Prometheus; other labels
// starting with "__" are Prometheus' internal ones and are dropped.
const (
	labelScheme      = "__scheme__"
	labelMetricsPath = "__metrics_path__"
)

// ParseFile reads a file_sd file: a list of {targets: [...], labels: {...}} groups, in JSON
// (name ending in .json) or YAML (.yml, .yaml). A target is host:port (or host), which becomes
// http://host:port/metrics (the group's __scheme__ and __metrics_path__ labels change the
// scheme and path), or a http(s) URL. Every target carries its group's labels, less those
// starting with "__" and those with an empty value. A URL listed twice keeps its first group's
// labels. An empty file is an error (a file being rewritten in place is empty for a moment;
// a file meaning "no targets" says []). Errors never quote a target's user info.
func ParseFile(name string, b []byte) ([]target.Target, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("file is empty; write [] for no targets")
	}
	var groups []group
	switch ext := strings.ToLower(filepath.Ext(name)); ext {
	case ".json":
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&groups); err != nil {
			return nil, fmt.Errorf("not a JSON list of {\"targets\": [...], \"labels\": {...}}: %w", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, errors.New("not a JSON list of groups: more after the list")
		}
	case ".yml", ".yaml":
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&groups); err != nil {
			return nil, fmt.Errorf("not a YAML list of {targets: [...], labels: {...}}: %w", err)
		}
	default:
		return nil, fmt.Errorf("extension %q: a file_sd file ends in .json, .yml or .yaml", ext)
	}
	var out []target.Target
	seen := map[string]bool{}
	for i, g := range groups {
		labels, scheme, path, err := groupLabels(g.Labels)
		if err != nil {
			return nil, fmt.Errorf("group %d: %w", i, err)
		}
		for j, raw := range g.Targets {
			t, err := fileTarget(raw, scheme, path)
			if err != nil {
				return nil, fmt.Errorf("group %d: targets[%d]: %q: %w", i, j, target.Redact(raw), err)
			}
			if seen[t.URL] {
				continue
			}
			seen[t.URL] = true
			t.Labels = labels
			out = append(out, t)
		}
	}
	return out, nil
}

// groupLabels checks a group's labels and splits off those that shape its targets' URLs.
func groupLabels(in map[string]string) (labels map[string]string, scheme, path string, err error) {
	scheme, path = "http", "/metrics"
	for _, k := range slices.Sorted(maps.Keys(in)) {
		v := in[k]
		switch {
		case !validLabelName(k):
			return nil, "", "", fmt.Errorf("label %q: not a label name (letters, digits and _, not starting with a digit)", k)
		case k == labelScheme:
			if v = strings.ToLower(v); v != "http" && v != "https" {
				return nil, "", "", fmt.Errorf("label %s: %q is not http or https", labelScheme, in[k])
			}
			scheme = v
		case k == labelMetricsPath:
			if !strings.HasPrefix(v, "/") {
				return nil, "", "", fmt.Errorf("label %s: %q does not start with /", labelMetricsPath, v)
			}
			path = v
		case strings.HasPrefix(k, "__"), v == "":
		default:
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
		}
	}
	return labels, scheme, path, nil
}

// fileTarget reads one target of a group: a URL, or host:port with the group's scheme and path.
func fileTarget(raw, scheme, path string) (target.Target, error) {
	raw = strings.TrimSpace(raw)
	if !strings.Contains(raw, "://") {
		if raw == "" || strings.ContainsAny(raw, "/?#@") {
			return target.Target{}, errors.New("want host:port or a URL such as http://host:8000/metrics")
		}
		raw = scheme + "://" + raw + path
	}
	return target.Parse(raw)
}

func validLabelName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// fileSet is the file_sd patterns and the files they matched. Only its loop goroutine uses it.
type fileSet struct {
	patterns []string
	log      *slog.Logger
	clock    clock.Clock
	read     func(path string) ([]byte, error) // readFile, but in tests
	files    map[string]*fileState
	empty    map[string]bool // patterns that matched no file at the last refresh
}

// fileState is one file's last content and targets.
type fileState struct {
	sum      [sha256.Size]byte
	read     bool            // sum holds the content of a read (good or broken)
	parsed   []target.Target // the targets of that content, when parsedOK
	parsedOK bool
	cur      []target.Target // the file's last answer: a good read's targets, none once gone
	applied  []target.Target // the targets handed over (see stable)
	known    bool            // applied were handed over
	failing  bool            // the file cannot be read or parsed (logged once per episode)
	gone     bool            // the patterns no longer match it (logged once)
	// reading is a read that outlived readTimeout, until it returns: the file is not read
	// again meanwhile.
	reading chan readResult
}

func newFileSet(patterns []string, log *slog.Logger) *fileSet {
	return &fileSet{patterns: patterns, log: log, clock: clock.Real{}, read: readFile, files: map[string]*fileState{}, empty: map[string]bool{}}
}

// FileSource is the name of the collector source that holds the targets of the file at path.
func FileSource(path string) string { return "file:" + path }

// refresh expands the patterns again and reads every file they match, returning an update for
// each file whose targets changed: a new file, a changed one, or one that no longer matches
// (its targets go). A file that cannot be read or parsed keeps its last good targets. A
// target goes once two answers of its file in a row lack it, as the file's content or as a
// file no longer there (see stable).
func (set *fileSet) refresh(ctx context.Context) []update {
	var matched []string
	for _, p := range set.patterns {
		ms, err := filepath.Glob(p) // checked at start: only ErrBadPattern, which cannot happen
		if err == nil && len(ms) == 0 && !set.empty[p] {
			set.log.Warn("file_sd pattern matches no file (yet)", "pattern", p)
		}
		set.empty[p] = err == nil && len(ms) == 0
		matched = append(matched, ms...)
	}
	slices.Sort(matched)
	matched = slices.Compact(matched)
	var ups []update
	for _, path := range slices.Sorted(maps.Keys(set.files)) {
		if _, ok := slices.BinarySearch(matched, path); ok {
			continue
		}
		st := set.files[path]
		if !st.gone {
			st.gone = true
			set.log.Info("file_sd file gone; its targets go if it is still gone at the next read", "path", path)
		}
		u, ok := set.answer(st, path, nil)
		if len(st.applied) == 0 {
			delete(set.files, path)
		}
		if ok {
			ups = append(ups, u)
		}
	}
	for _, path := range matched {
		if ctx.Err() != nil {
			return ups // the run is ending
		}
		if u, ok := set.refreshFile(ctx, path); ok {
			ups = append(ups, u)
		}
	}
	return ups
}

// refreshFile reads one file; ok reports an update.
func (set *fileSet) refreshFile(ctx context.Context, path string) (u update, ok bool) {
	st := set.files[path]
	if st == nil {
		st = &fileState{}
		set.files[path] = st
	}
	b, err := set.readBounded(ctx, st, path)
	switch {
	case ctx.Err() != nil:
		return update{}, false
	case errors.Is(err, fs.ErrNotExist):
		return update{}, false // gone between the glob and the read: the next refresh says so
	case err != nil:
		st.read = false // read it again next time
		set.fail(st, path, err)
		return update{}, false
	}
	st.gone = false
	if sum := sha256.Sum256(b); !st.read || sum != st.sum {
		st.read, st.sum = true, sum
		st.parsed, err = ParseFile(path, b)
		st.parsedOK = err == nil
		if err != nil {
			set.fail(st, path, err)
		}
	}
	if !st.parsedOK {
		return update{}, false // broken, as at its last read: its last good targets stay
	}
	if st.failing {
		st.failing = false
		set.log.Info("file_sd file recovered", "path", path, "targets", len(st.parsed))
	}
	return set.answer(st, path, st.parsed)
}

// answer takes ts as the file's answer and returns an update when what it hands over changes.
func (set *fileSet) answer(st *fileState, path string, ts []target.Target) (update, bool) {
	apply := stable(ts, st.cur, st.applied)
	st.cur = ts
	if st.known && sameTargets(apply, st.applied) {
		return update{}, false
	}
	st.applied, st.known = apply, true
	return update{source: FileSource(path), targets: apply}, true
}

// fail logs a file that cannot be read or parsed once per episode.
func (set *fileSet) fail(st *fileState, path string, err error) {
	if !st.failing {
		st.failing = true
		set.log.Error("file_sd file is broken; keeping its last good targets", "path", path, "targets", len(st.applied), "err", err)
	}
}

// readTimeout bounds the read of one file: a file on a mount that stopped answering holds
// neither the other files nor the run's shutdown.
const readTimeout = 5 * time.Second

// errStillReading is the error of a file whose earlier read has not returned yet.
var errStillReading = fmt.Errorf("an earlier read has not returned after %v; it is read again once it has", readTimeout)

type readResult struct {
	b   []byte
	err error
}

// readBounded reads the file at path within readTimeout and until ctx ends, on a goroutine of
// its own: a read that outlives them is left to return in its own time (a read stuck in the
// kernel cannot be interrupted), and the file is not read again until it has.
func (set *fileSet) readBounded(ctx context.Context, st *fileState, path string) ([]byte, error) {
	if st.reading != nil {
		select {
		case <-st.reading:
			st.reading = nil
		default:
			return nil, errStillReading
		}
	}
	ch := make(chan readResult, 1)
	go func() {
		b, err := set.read(path)
		ch <- readResult{b, err}
	}()
	timer := set.clock.NewTimer(readTimeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-timer.C():
		st.reading = ch
		return nil, fmt.Errorf("no answer from the file system within %v", readTimeout)
	case <-ctx.Done():
		st.reading = ch
		return nil, ctx.Err()
	}
}

// errNotRegular is the error of a path that names something else than a regular file: a
// FIFO would block its reader until some writer opens it, a device may never end.
var errNotRegular = errors.New("not a regular file; file_sd reads regular files only")

// notRegular says what a file of mode m is instead of a regular file.
func notRegular(m fs.FileMode) error {
	kind := "a special file"
	switch {
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	}
	return fmt.Errorf("%s: %w", kind, errNotRegular)
}

// readFile reads path, a regular file of at most maxFileBytes: anything else is an error,
// found before reading. It is opened without blocking, in case it was replaced by a FIFO
// since its stat.
func readFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(fi.Mode())
	}
	tooLarge := fmt.Errorf("larger than %d MiB: not a file_sd file", maxFileBytes>>20)
	if fi.Size() > maxFileBytes {
		return nil, tooLarge
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileBytes {
		return nil, tooLarge
	}
	return b, nil
}
