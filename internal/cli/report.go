package cli

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/report"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

const reportHelp = `Usage: vllmstat report RUN_DIR|RECORDING [-o FILE]

Writes the report of a run (the OUT folder of run, record or demo) as one HTML file that opens
from disk without network: charts of every step metric across steps, the per-worker timelines
of a chosen step (when the run wrote timelines/), and a table of all steps. Given a recording
(vllmstat run --record FILE), it replays it (all its segments) and reports its steps; the report
goes next to it (run.jsonl.gz gives run.report.html) unless -o says otherwise.

Flags:
`

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vllmstat report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the report to `FILE` (default RUN_DIR/report.html)")
	title := fs.String("title", "", "title of the page (default: the run folder's name)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), reportHelp)
		fs.PrintDefaults()
	}
	// The run folder may come before the flags: "report RUN_DIR -o FILE".
	var dir string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		dir, args = args[0], args[1:]
	}
	if code, done := parseFlags(fs, args, stdout); done {
		return code
	}
	rest := fs.Args()
	if dir == "" && len(rest) > 0 {
		dir, rest = rest[0], rest[1:]
	}
	if dir == "" || len(rest) > 0 {
		fmt.Fprintln(stderr, "vllmstat report: give one RUN_DIR or RECORDING")
		fs.Usage()
		return exitUsage
	}
	path := *out
	if st, err := os.Stat(dir); err == nil && st.Mode().IsRegular() {
		// A recording: its steps are replayed into a folder of their own first.
		if path == "" {
			path = recordingReportPath(dir)
		}
		tmp, err := os.MkdirTemp("", "vllmstat-report-")
		if err != nil {
			fmt.Fprintf(stderr, "vllmstat report: %v\n", err)
			return exitError
		}
		defer os.RemoveAll(tmp)
		if code := replayInto(ctx, dir, tmp, stderr); code != exitOK {
			return code
		}
		if *title == "" {
			*title = filepath.Base(dir)
		}
		dir = tmp
	}
	if path == "" {
		path = filepath.Join(dir, "report.html")
	}
	// Building the report reads the whole run folder, which a damaged or hostile file can make
	// slow; on SIGINT or SIGTERM the command returns at once and the process exits with it. The
	// report is written to a temporary file and renamed, so none is left half written.
	done := make(chan error, 1)
	go func() { done <- report.WriteFile(path, dir, report.Options{Title: *title}) }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(stderr, "vllmstat report: %v\n", err)
			return exitUsage
		}
	case <-ctx.Done():
		fmt.Fprintln(stderr, "vllmstat report: interrupted")
		return exitError
	}
	fmt.Fprintln(stdout, path)
	return exitOK
}

// recordingReportPath is where the report of a recording goes by default: beside it, its name
// without the recording's extensions plus .report.html.
func recordingReportPath(rec string) string {
	base := filepath.Base(rec)
	for _, ext := range []string{".gz", ".jsonl", ".json"} {
		base = strings.TrimSuffix(base, ext)
	}
	return filepath.Join(filepath.Dir(rec), base+".report.html")
}

// replayInto replays the recording rec (every segment, per-worker records included) into
// dir/steps.jsonl.
func replayInto(ctx context.Context, rec, dir string, stderr io.Writer) int {
	segs, err := record.Segments(rec)
	if err != nil {
		fmt.Fprintf(stderr, "vllmstat report: %v\n", err)
		return exitUsage
	}
	f, err := os.Create(filepath.Join(dir, "steps.jsonl"))
	if err != nil {
		fmt.Fprintf(stderr, "vllmstat report: %v\n", err)
		return exitError
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	opt := step.Options{Prefix: vllm.Prefix, PerWorker: true, Scalars: true}
	if code := replayAll(ctx, segs, opt, page.DefaultWorkerLabels(), record.DefaultMaxLine, w, stderr); code != exitOK {
		return code
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "vllmstat report: %v\n", err)
		return exitError
	}
	return exitOK
}
