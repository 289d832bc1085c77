// Package cli holds vllmstat's subcommands. Each one parses its own flags and returns an exit
// code, so that tests can run the whole program in-process.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitError = 1 // a run that started failed
	exitUsage = 2 // bad flags, bad config, bad input file
)

type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands lists every subcommand; each lives in its own file of this package.
var commands map[string]command

func init() {
	// Assigned here rather than in the declaration because usage() reads the map.
	commands = map[string]command{
		"demo":   {"run a simulated vLLM fleet and show its per-step metrics (start here)", runDemo},
		"run":    {"scrape a vLLM fleet and write per-step metrics", runRun},
		"record": {"run, also writing every scrape to FILE: record FILE [run flags]", runRecord},
		"report": {"write a self-contained HTML report of a run directory", runReport},
		"replay": {"recompute the step records of a recording", runReplay},
		"watch":  {"print live fleet numbers every interval, like vmstat", runWatch},
		"sim":    {"start a simulated vLLM fleet serving /metrics", runSim},

		"completion": {"print a shell completion script: completion bash|zsh|fish", runCompletion},
	}
}

// Run runs vllmstat with the given arguments (without the program name) until it is done or
// interrupted by SIGINT or SIGTERM.
func Run(args []string, stdout, stderr io.Writer) int {
	quietStdLogger(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return RunContext(ctx, args, stdout, stderr)
}

// RunContext is Run ended by ctx instead of a signal: long-running commands (run, demo,
// watch, sim) stop as on SIGINT when ctx ends.
func RunContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "help":
		return help(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		return runVersion(args[1:], stdout, stderr)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "vllmstat: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

// help is `vllmstat help [COMMAND]`: the top-level help, or COMMAND's own (its -h).
func help(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok || len(args) > 1 {
		if ok {
			fmt.Fprintf(stderr, "vllmstat help: give one command, not %q\n\n", args)
		} else {
			fmt.Fprintf(stderr, "vllmstat help: unknown command %q\n\n", args[0])
		}
		usage(stderr)
		return exitUsage
	}
	return c.run(ctx, []string{"-h"}, stdout, stderr)
}

// parseFlags parses args; done reports that the command should return code right away. The
// command's help is printed once: on -h to stdout (exit 0), after a flag error to the flag
// set's output, stderr (exit 2), with the nearest flag after the error of one the command does
// not have.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (code int, done bool) {
	usage := fs.Usage
	if usage == nil {
		usage = func() {
			fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
	}
	fs.Usage = func() {} // the flag package would print it on -h too, to stderr
	restore := decimalNumbers(fs)
	err := fs.Parse(args)
	restore()
	fs.Usage = usage
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		out := fs.Output()
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(out)
		return exitOK, true
	default:
		// The flag package has printed the error: a flag the command does not have gets the
		// nearest one it has right below it.
		if n := nearFlag(fs, err); n != "" {
			fmt.Fprintf(fs.Output(), "did you mean %s?\n", n)
		}
		fs.Usage()
		return exitUsage, true
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `vllmstat: exact per-step metrics from a fleet of vLLM engines.

Usage:
  vllmstat <command> [flags]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(w, `
Run "vllmstat help <command>" (or "vllmstat <command> -h") for a command's usage and flags.
`)
}
