package gate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// standInGo is a go command for scripts/fuzz: at the repository's top it lists one fuzz
// target (none in the nested modules), and fuzzing it prints go test's last progress line with
// FAKE_EXECS executions. Every call's arguments are appended to FAKE_GO_ARGS.
const standInGo = `#!/usr/bin/env bash
echo "$*" >>"$FAKE_GO_ARGS"
case "$*" in
*"-list ^Fuzz"*)
	[ -f scripts/fuzz ] && echo FuzzStandIn
	echo "ok  	example.com/standin	0.01s" ;;
*"-fuzz ^FuzzStandIn"*)
	echo "fuzz: elapsed: 20s, execs: $FAKE_EXECS (5/sec), new interesting: 0 (total: 98)"
	echo PASS ;;
*)
	echo "stand-in go: unexpected go $*" >&2
	exit 3 ;;
esac
`

// TestFuzzScript runs scripts/fuzz with a stand-in go command: the script bounds how long each
// new input is shrunk (go test's default, a minute with no input fuzzed meanwhile, left the
// page parsers' targets at about 100 executions a minute), and it fails a target that ran too
// few executions to have fuzzed rather than report it as passed.
func TestFuzzScript(t *testing.T) {
	script, err := filepath.Abs(filepath.Join(root, "scripts/fuzz"))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(standInGo), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		execs   string
		env     []string
		fails   bool
		says    string
		shrinks string
	}{
		{execs: "135", fails: true, says: "FuzzStandIn (example.com/standin): STALLED, 135 executions in 20s (fewer than 1000)", shrinks: "-fuzzminimizetime 2s"},
		{execs: "227164", says: "FuzzStandIn (example.com/standin): 227164 executions, no failure", shrinks: "-fuzzminimizetime 2s"},
		{execs: "400", env: []string{"FUZZ_MIN_EXECS=300", "FUZZ_MINIMIZE=100x"}, says: "400 executions, no failure", shrinks: "-fuzzminimizetime 100x"},
	} {
		t.Run(c.execs, func(t *testing.T) {
			args := filepath.Join(t.TempDir(), "args")
			cmd := exec.Command("bash", script, "20s", "^FuzzStandIn$")
			cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
				"FAKE_GO_ARGS="+args, "FAKE_EXECS="+c.execs, "TMPDIR="+t.TempDir())
			cmd.Env = append(cmd.Env, c.env...)
			out, err := cmd.CombinedOutput()
			if failed := err != nil; failed != c.fails {
				t.Fatalf("scripts/fuzz failed: %v, want %v; its output:\n%s", failed, c.fails, out)
			}
			if !strings.Contains(string(out), c.says) {
				t.Errorf("scripts/fuzz's output does not say %q:\n%s", c.says, out)
			}
			calls, err := os.ReadFile(args)
			if err != nil {
				t.Fatal(err)
			}
			var fuzzed []string
			for _, call := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
				if strings.Contains(call, "-fuzz ") {
					fuzzed = append(fuzzed, call)
				}
			}
			if len(fuzzed) != 1 || !strings.Contains(fuzzed[0], c.shrinks) {
				t.Errorf("fuzzing calls %q, want one with %s", fuzzed, c.shrinks)
			}
		})
	}
}
