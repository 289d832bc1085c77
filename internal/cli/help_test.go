package cli

import (
	"bytes"
	"context"
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
