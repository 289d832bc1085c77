package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs vllmstat in-process with args and returns its exit code and output.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = RunContext(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestCommandHelpOnce checks every command's -h and --help, and `help CMD`: the command's own
// help, once, on stdout, nothing on stderr, exit 0.
func TestCommandHelpOnce(t *testing.T) {
	for name := range commands {
		usageLine := "Usage: vllmstat " + name
		for _, args := range [][]string{{name, "-h"}, {name, "--help"}, {"help", name}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, out, errs := runCLI(args...)
				if code != exitOK {
					t.Fatalf("exit %d, want 0; stderr %q", code, errs)
				}
				if errs != "" {
					t.Errorf("stderr %q, want nothing", errs)
				}
				if n := strings.Count(out, "Usage:"); n != 1 || !strings.HasPrefix(out, usageLine) {
					t.Errorf("stdout has %d usage texts and starts %q, want one, starting %q:\n%s", n, firstLine(out), usageLine, out)
				}
			})
		}
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// TestHelpCommandSameAsDashH checks that `help CMD` prints exactly what `CMD -h` does.
func TestHelpCommandSameAsDashH(t *testing.T) {
	for name := range commands {
		_, viaHelp, _ := runCLI("help", name)
		_, viaFlag, _ := runCLI(name, "-h")
		if viaHelp != viaFlag {
			t.Errorf("help %s differs from %s -h:\n%s\n---\n%s", name, name, viaHelp, viaFlag)
		}
	}
}

func TestTopLevelHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, errs := runCLI(args...)
		if code != exitOK || errs != "" || !strings.HasPrefix(out, "vllmstat: exact per-step metrics") {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", args, code, errs, firstLine(out))
		}
		for name := range commands {
			if !strings.Contains(out, "\n  "+name+" ") {
				t.Errorf("%v does not list %s", args, name)
			}
		}
	}
	// The record line shows record's own usage, not run's flag.
	_, out, _ := runCLI("help")
	_, recUsage, _ := runCLI("record", "-h")
	usage := strings.TrimPrefix(firstLine(recUsage), "Usage: vllmstat ")
	if !strings.Contains(out, usage) || strings.Contains(out, "-record FILE") {
		t.Errorf("top-level help does not show record's usage %q:\n%s", usage, out)
	}
}

func TestHelpErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"help", "nope"}, `vllmstat help: unknown command "nope"`},
		{[]string{"help", "run", "sim"}, "give one command"},
		{[]string{"nope"}, `vllmstat: unknown command "nope"`},
	}
	for _, tt := range tests {
		code, out, errs := runCLI(tt.args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, tt.want) || !strings.Contains(errs, "Commands:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2, %q and the command list on stderr", tt.args, code, out, errs, tt.want)
		}
	}
}

// TestBadFlagUsageOnce checks that a bad flag prints the error and the command's usage once,
// on stderr, and exits 2.
func TestBadFlagUsageOnce(t *testing.T) {
	for _, name := range []string{"run", "watch", "sim", "replay", "report", "demo"} {
		code, out, errs := runCLI(name, "--no-such-flag")
		if code != exitUsage || out != "" {
			t.Errorf("%s: exit %d, stdout %q", name, code, out)
		}
		if !strings.Contains(errs, "flag provided but not defined: -no-such-flag") || strings.Count(errs, "Usage:") != 1 {
			t.Errorf("%s: stderr %q, want the error and one usage", name, errs)
		}
	}
}

// TestNearMissFlags: a flag a command does not have gets, after the error, the nearest flag it
// has (a typo, a longer or shorter spelling, another command's name of it), for every command;
// a flag near none gets no suggestion.
func TestNearMissFlags(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "run.jsonl.gz")
	for _, tt := range []struct {
		args      []string
		bad, want string
	}{
		{[]string{"run", "--out-dir", "x"}, "out-dir", "--out"},
		{[]string{"run", "--output=x"}, "output", "--out"},
		{[]string{"run", "--targets", "h:1"}, "targets", "--target"},
		{[]string{"run", "--step", "10s"}, "step", "--step-every"},
		{[]string{"record", rec, "--out-dir", "x"}, "out-dir", "--out"},
		{[]string{"demo", "--out-dir", "x"}, "out-dir", "--out"},
		{[]string{"demo", "--sever", "2"}, "sever", "--servers"},
		{[]string{"sim", "--server", "2"}, "server", "--servers"},
		{[]string{"watch", "--intervall", "1"}, "intervall", "--interval"},
		{[]string{"replay", "--per-workers", rec}, "per-workers", "--per-worker"},
		{[]string{"report", "--out", "r.html"}, "out", "-o"},
		{[]string{"report", "--titel", "t"}, "titel", "--title"},
	} {
		code, out, errs := runCLI(tt.args...)
		want := fmt.Sprintf("flag provided but not defined: -%s\ndid you mean %s?\n", tt.bad, tt.want)
		if code != exitUsage || out != "" || !strings.HasPrefix(errs, want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and stderr starting %q", tt.args, code, out, firstLines(errs, 3), want)
		}
	}
	for _, name := range []string{"run", "watch", "sim", "replay", "report", "demo"} {
		if _, _, errs := runCLI(name, "--no-such-flag"); strings.Contains(errs, "did you mean") {
			t.Errorf("%s --no-such-flag: a suggestion: %q", name, firstLines(errs, 3))
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
