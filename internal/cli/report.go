package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/vllmstat/vllmstat/internal/report"
)

const reportHelp = `Usage: vllmstat report RUN_DIR [-o FILE]

Writes the report of a run (the OUT folder of run, record or demo) as one HTML file that opens
from disk without network: charts of every step metric across steps, the per-worker timelines
of a chosen step (when the run wrote timelines/), and a table of all steps.

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
		fmt.Fprintln(stderr, "vllmstat report: give one RUN_DIR")
		fs.Usage()
		return exitUsage
	}
	path := *out
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
