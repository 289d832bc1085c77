package record

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// segmentExts are the extensions a segment number goes in front of, longest first, so that
// run.jsonl.gz's second segment is run.2.jsonl.gz and stays a gzip file by its name.
var segmentExts = []string{".jsonl.gz", ".jsonl", ".gz"}

// SegmentPath is the path of the recording's n-th segment (n >= 2; the first is path itself):
// the number goes before a .jsonl.gz, .jsonl or .gz extension, else at the end
// (run.jsonl.gz: run.2.jsonl.gz; run.rec: run.rec.2).
func SegmentPath(path string, n int) string {
	if n <= 1 {
		return path
	}
	for _, ext := range segmentExts {
		if base, ok := strings.CutSuffix(path, ext); ok && base != "" && !strings.HasSuffix(base, "/") {
			return base + "." + strconv.Itoa(n) + ext
		}
	}
	return path + "." + strconv.Itoa(n)
}

// Segments returns the paths of the recording's segments in order: path, then each later one
// while it exists. path must exist.
func Segments(path string) ([]string, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open recording: %w", err)
	}
	out := []string{path}
	for n := 2; ; n++ {
		p := SegmentPath(path, n)
		if _, err := os.Stat(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return out, nil
			}
			return nil, fmt.Errorf("open recording segment: %w", err)
		}
		out = append(out, p)
	}
}

// createSegment creates path, or when it exists the first segment after it that does not,
// never truncating anything: O_EXCL makes two runs starting at once take different segments.
func createSegment(path string) (*os.File, string, error) {
	for n := 1; n < 100000; n++ {
		p := SegmentPath(path, n)
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			return f, p, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, "", fmt.Errorf("create recording: %w", err)
		}
	}
	return nil, "", fmt.Errorf("create recording %q: every segment number is taken", path)
}

// ResumedFrom reads the start event that begins a segment and returns the step its run was
// resumed from (resume_from), if it was: that run cut the steps after it out of steps.jsonl,
// so a replay that is to equal steps.jsonl leaves the earlier segments' steps after it out.
// A segment that does not begin with a start event (earlier versions wrote none) was not.
func ResumedFrom(ctx context.Context, path string, maxLine int) (int64, bool, error) {
	r, err := OpenContext(ctx, path, maxLine)
	if err != nil {
		return 0, false, err
	}
	defer r.Close()
	e, err := r.Next()
	if errors.Is(err, io.EOF) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if e.Kind != KindStart || e.ResumeFrom == nil {
		return 0, false, nil
	}
	return *e.ResumeFrom, true, nil
}
