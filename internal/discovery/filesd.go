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

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/scrape"
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
func ParseFile(name string, b []byte) ([]scrape.Target, error) {
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
	var out []scrape.Target
	seen := map[string]bool{}
	for i, g := range groups {
		labels, scheme, path, err := groupLabels(g.Labels)
		if err != nil {
			return nil, fmt.Errorf("group %d: %w", i, err)
		}
		for j, raw := range g.Targets {
			t, err := fileTarget(raw, scheme, path)
			if err != nil {
				return nil, fmt.Errorf("group %d: targets[%d]: %q: %w", i, j, scrape.Redact(raw), err)
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
func fileTarget(raw, scheme, path string) (scrape.Target, error) {
	raw = strings.TrimSpace(raw)
	if !strings.Contains(raw, "://") {
		if raw == "" || strings.ContainsAny(raw, "/?#@") {
			return scrape.Target{}, errors.New("want host:port or a URL such as http://host:8000/metrics")
		}
		raw = scheme + "://" + raw + path
	}
	return scrape.ParseTarget(raw)
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
	files    map[string]*fileState
	empty    map[string]bool // patterns that matched no file at the last refresh
}

// fileState is one file's last content and targets.
type fileState struct {
	sum     [sha256.Size]byte
	read    bool // sum holds the content of a read (good or broken)
	targets []scrape.Target
	known   bool // targets come from a good read
	failing bool // the content is broken (logged once per episode)
}

func newFileSet(patterns []string, log *slog.Logger) *fileSet {
	return &fileSet{patterns: patterns, log: log, files: map[string]*fileState{}, empty: map[string]bool{}}
}

// FileSource is the name of the collector source that holds the targets of the file at path.
func FileSource(path string) string { return "file:" + path }

// refresh expands the patterns again and reads every file they match, returning an update for
// each file whose targets changed: a new file, a changed one, or one that no longer matches
// (its targets go). A broken file keeps its last good targets.
func (set *fileSet) refresh(context.Context) []update {
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
	for path := range set.files {
		if !slices.Contains(matched, path) {
			delete(set.files, path)
			ups = append(ups, update{source: FileSource(path)})
			set.log.Info("file_sd file gone; its targets go too", "path", path)
		}
	}
	slices.SortFunc(ups, func(a, b update) int { return strings.Compare(a.source, b.source) })
	for _, path := range matched {
		if u, ok := set.refreshFile(path); ok {
			ups = append(ups, u)
		}
	}
	return ups
}

// refreshFile reads one file; ok reports an update.
func (set *fileSet) refreshFile(path string) (u update, ok bool) {
	st := set.files[path]
	if st == nil {
		st = &fileState{}
		set.files[path] = st
	}
	b, err := readFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return update{}, false // gone between the glob and the read: the next refresh says so
	case err != nil:
		st.read = false // read it again next time
		set.fail(st, path, err)
		return update{}, false
	}
	sum := sha256.Sum256(b)
	if st.read && sum == st.sum {
		return update{}, false // unchanged, good or broken
	}
	st.read, st.sum = true, sum
	ts, err := ParseFile(path, b)
	if err != nil {
		set.fail(st, path, err)
		return update{}, false
	}
	if st.failing {
		st.failing = false
		set.log.Info("file_sd file recovered", "path", path, "targets", len(ts))
	}
	if st.known && sameTargets(ts, st.targets) {
		return update{}, false
	}
	st.targets, st.known = ts, true
	return update{source: FileSource(path), targets: ts}, true
}

// fail logs a broken file once per episode.
func (set *fileSet) fail(st *fileState, path string, err error) {
	if !st.failing {
		st.failing = true
		set.log.Error("file_sd file is broken; keeping its last good targets", "path", path, "targets", len(st.targets), "err", err)
	}
}

// readFile reads at most maxFileBytes of path; a larger file is an error.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d MiB: not a file_sd file", maxFileBytes>>20)
	}
	return b, nil
}
