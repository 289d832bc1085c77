package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResumeFromIsDecimal: --resume-from 010 is step 10, as a zero-padded checkpoint name
// gives it, not octal 8 (the flag package's reading), which cut steps 9 and 10 out of
// steps.jsonl; 000120 likewise is 120, not 80. The run keeps every step and goes on after it.
func TestResumeFromIsDecimal(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 41)
	for _, tt := range []struct {
		flag string
		last int
	}{{"010", 10}, {"000120", 120}} {
		t.Run(tt.flag, func(t *testing.T) {
			out := t.TempDir()
			path := filepath.Join(out, "steps.jsonl")
			var old strings.Builder
			for i := 1; i <= tt.last; i++ {
				fmt.Fprintf(&old, `{"step":%d,"metrics":{}}`+"\n", i)
			}
			if err := os.WriteFile(path, []byte(old.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			l := startLive(t, out, "--target", a.url(), "--resume-from", tt.flag)
			code, body := l.tryEndStep(tt.last + 1)
			if c := l.stop(); c != 0 {
				t.Fatalf("exit %d\n%s", c, l.stderr.String())
			}
			if code != 200 {
				t.Errorf("step %d after --resume-from %s: %d %s", tt.last+1, tt.flag, code, body)
			}
			recs, _ := readSteps(t, path)
			var got []int64
			for _, r := range recs {
				got = append(got, r.Step)
			}
			if len(got) != tt.last+1 || got[tt.last-1] != int64(tt.last) || got[tt.last] != int64(tt.last+1) {
				t.Errorf("--resume-from %s: steps.jsonl holds steps %v, want 1 to %d", tt.flag, got, tt.last+1)
			}
			if b, err := os.ReadFile(path + ".cut-1"); err == nil {
				t.Errorf("--resume-from %s cut %d steps out of steps.jsonl", tt.flag, strings.Count(string(b), "\n"))
			}
		})
	}
}

// TestNumberFlagsAreDecimal: every flag that takes a whole number refuses a 0x, 0b or 0o
// prefix, and every flag that takes a number refuses inf, nan and hexadecimal, naming the flag,
// before the command does anything. Each command is given a second problem that it would
// report after its flags, were the number read: only the flag's problem must be told.
func TestNumberFlagsAreDecimal(t *testing.T) {
	for _, tt := range []struct {
		args []string
		flag string
	}{
		{[]string{"run", "--listen", "", "--resume-from", "0x8"}, "-resume-from"},
		{[]string{"run", "--listen", "", "--resume-from", "0b1000"}, "-resume-from"},
		{[]string{"run", "--listen", "", "--resume-from", "0o10"}, "-resume-from"},
		{[]string{"run", "--listen", "", "--interval", "nan"}, "-interval"},
		{[]string{"run", "--listen", "", "--interval", "+Inf"}, "-interval"},
		{[]string{"run", "--listen", "", "--interval", "0x1p-1"}, "-interval"},
		{[]string{"sim", "--engine", "none", "--servers", "0x2"}, "-servers"},
		{[]string{"sim", "--engine", "none", "--seed", "0o17"}, "-seed"},
		{[]string{"sim", "--engine", "none", "--speed", "inf"}, "-speed"},
		{[]string{"sim", "--engine", "none", "--rate", "NaN"}, "-rate"},
		{[]string{"demo", "--engine", "none", "--steps", "0x3"}, "-steps"},
		{[]string{"demo", "--engine", "none", "--straggler", "nan"}, "-straggler"},
		{[]string{"replay", "--max-line-bytes", "0x100000"}, "-max-line-bytes"},
		{[]string{"watch", "--interval", "inf"}, "-interval"},
		{[]string{"watch", "--timeout", "nan"}, "-timeout"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := runCLI(tt.args...)
			if code != exitUsage || !strings.Contains(stderr, "for flag "+tt.flag+": must be a") {
				t.Errorf("exit %d, want %d and the flag %s named:\n%s", code, exitUsage, tt.flag, stderr)
			}
		})
	}
}

// TestNumberFlagsReadLeadingZerosAsDecimal: --servers 010 is ten servers, not eight, and 09 is
// nine, not a flag error. The port leaves no room for them, and sim says how many it read.
func TestNumberFlagsReadLeadingZerosAsDecimal(t *testing.T) {
	for _, tt := range []struct{ servers, want string }{{"010", "10 servers"}, {"09", "9 servers"}} {
		code, _, stderr := runCLI("sim", "--servers", tt.servers, "--port", "65530")
		if code != exitUsage || !strings.Contains(stderr, "port 65530 does not leave room for "+tt.want) {
			t.Errorf("--servers %s: exit %d, want the port's problem with %s:\n%s", tt.servers, code, tt.want, stderr)
		}
	}
}

// TestWatchRefusesANegativeTimeout: --timeout -1 was taken as "the default" without a word. It
// is told with the other problems of the command line (here a bad target).
func TestWatchRefusesANegativeTimeout(t *testing.T) {
	code, _, stderr := runCLI("watch", "--timeout", "-1", "http://[::1")
	if code != exitUsage || !strings.Contains(stderr, "--timeout: -1s is not allowed") || !strings.Contains(stderr, "arguments[0]") {
		t.Errorf("--timeout -1: exit %d:\n%s", code, stderr)
	}
}

// TestGPUFlagTakesReportedName: --gpu takes the name torch.cuda.get_device_name() gives, which
// was refused; the run here stops at its other problem (no targets) alone.
func TestGPUFlagTakesReportedName(t *testing.T) {
	code, _, stderr := runCLI("run", "--listen", "", "--gpu", "NVIDIA H100 80GB HBM3")
	if code != exitUsage || strings.Contains(stderr, "--gpu") || !strings.Contains(stderr, "no targets") {
		t.Errorf("--gpu \"NVIDIA H100 80GB HBM3\": exit %d:\n%s", code, stderr)
	}
}
