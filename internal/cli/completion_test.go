package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestBashCompletion loads the bash script into a real bash and asks it what it completes:
// commands, a command's flags, completion's shells.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("SKIPPED: no bash")
	}
	var script bytes.Buffer
	if code := RunContext(context.Background(), []string{"completion", "bash"}, &script, &bytes.Buffer{}); code != 0 {
		t.Fatalf("completion bash exited %d", code)
	}
	path := filepath.Join(t.TempDir(), "vllmstat.bash")
	if err := os.WriteFile(path, script.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) []string {
		t.Helper()
		arr := "(" + strings.Join(quoteAll(words), " ") + ")"
		cmd := exec.Command(bash, "-c", "source "+path+"; COMP_WORDS="+arr+"; COMP_CWORD="+strconv.Itoa(len(words)-1)+"; _vllmstat; printf '%s\\n' \"${COMPREPLY[@]}\"")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	if got := complete("vllmstat", "re"); strings.Join(got, " ") != "record replay report" {
		t.Errorf("vllmstat re<TAB> = %v", got)
	}
	if got := complete("vllmstat", "run", "--step"); strings.Join(got, " ") != "--step-every" {
		t.Errorf("vllmstat run --step<TAB> = %v", got)
	}
	if got := complete("vllmstat", "record", "run.gz", "--tar"); len(got) == 0 || got[0] != "--target" {
		t.Errorf("vllmstat record run.gz --tar<TAB> = %v, want run's flags", got)
	}
	if got := complete("vllmstat", "report", "-"); !slices.Contains(got, "-o") || !slices.Contains(got, "--title") {
		t.Errorf("vllmstat report -<TAB> = %v", got)
	}
	if got := complete("vllmstat", "completion", "f"); strings.Join(got, " ") != "fish" {
		t.Errorf("vllmstat completion f<TAB> = %v", got)
	}
}

// TestCompletionScripts: zsh's and fish's scripts name every command, and a bad shell is a
// usage error.
func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"zsh", "fish"} {
		var out bytes.Buffer
		if code := RunContext(context.Background(), []string{"completion", sh}, &out, &bytes.Buffer{}); code != 0 {
			t.Fatalf("completion %s exited %d", sh, code)
		}
		for name := range commands {
			if !strings.Contains(out.String(), name) {
				t.Errorf("%s script lacks %s", sh, name)
			}
		}
	}
	var errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"completion", "tcsh"}, &bytes.Buffer{}, &errb); code != exitUsage || !strings.Contains(errb.String(), `unknown shell "tcsh"`) {
		t.Errorf("completion tcsh: exit %d, %q", code, errb.String())
	}
}

func quoteAll(ws []string) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = "'" + w + "'"
	}
	return out
}
