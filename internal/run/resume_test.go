package run

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLastStep(t *testing.T) {
	long := `{"step":%d,"metrics":{"pad":"` + strings.Repeat("x", 100<<10) + `"}}` + "\n"
	tests := []struct {
		name, content string
		n             int64
		ok            bool
	}{
		{"empty", "", 0, false},
		{"one", `{"step":3}` + "\n", 3, true},
		{"cut short by kill -9", `{"step":3}` + "\n" + `{"step":4,"met`, 3, true},
		{"no newline at all", `{"step":4}`, 0, false},
		{"a broken line before", `{"step":2}` + "\n" + "not json\n", 2, true},
		{"step 0", `{"step":0}` + "\n", 0, true},
		{"long lines", fmt.Sprintf(long, 1) + fmt.Sprintf(long, 2) + `{"step":3,"x`, 2, true},
		{"many lines", strings.Repeat(`{"step":1}`+"\n", 20000) + `{"step":77}` + "\n", 77, true},
		{"last of 0 to 2^53 - 1", `{"step":9007199254740991}` + "\n", 9007199254740991, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "steps.jsonl")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			n, ok, err := lastStep(path)
			if err != nil || n != tt.n || ok != tt.ok {
				t.Fatalf("lastStep = %d, %v, %v; want %d, %v", n, ok, err, tt.n, tt.ok)
			}
		})
	}
	if _, ok, err := lastStep(filepath.Join(t.TempDir(), "none")); ok || err != nil {
		t.Fatalf("missing file: %v, %v", ok, err)
	}
}

// TestLastStepPassesOverNonSteps: lines that are JSON but no step record ({}, a note, null, a
// null step, a value that is no object) are passed over, and the run continues after the last
// real step, however many such lines follow it, across the read window's edges.
func TestLastStepPassesOverNonSteps(t *testing.T) {
	notSteps := "{}\n" + `{"note":"x"}` + "\n" + "null\n" + `{"step":null}` + "\n" + `{"Step":null,"metrics":{}}` + "\n" + "[1]\n" + `"step"` + "\n" + "7\n"
	pad := `{"note":"` + strings.Repeat("x", 40<<10) + `"}` + "\n"
	for _, tt := range []struct{ name, content string }{
		{"one of each", `{"step":1}` + "\n" + `{"step":5,"metrics":{}}` + "\n" + notSteps},
		{"between steps and after", `{"step":1}` + "\n" + notSteps + `{"step":5}` + "\n" + notSteps},
		{"beyond the first window", `{"step":1}` + "\n" + `{"step":5}` + "\n" + strings.Repeat(pad, 5) + notSteps},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "steps.jsonl")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			n, ok, err := lastStep(path)
			if err != nil || n != 5 || !ok {
				t.Fatalf("lastStep = %d, %v, %v; want 5, true", n, ok, err)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "steps.jsonl")
	if err := os.WriteFile(path, []byte(notSteps), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, ok, err := lastStep(path); ok || err != nil {
		t.Fatalf("no step record: lastStep = %d, %v, %v; want none", n, ok, err)
	}
}

// TestLastStepRefusesBadNumbers: a last step record whose step no run can continue after is an
// error that names its line, the step as written, the numbers allowed and what to do; a bad
// step before the last good one does not matter.
func TestLastStepRefusesBadNumbers(t *testing.T) {
	long := `{"step":%d,"metrics":{"pad":"` + strings.Repeat("x", 100<<10) + `"}}` + "\n"
	head := `{"step":1}` + "\n" + "{}\n"
	for _, tt := range []struct {
		name, content, shown string
		line                 int
	}{
		{"1e18", head + `{"step":1000000000000000000}` + "\n", "1000000000000000000", 3},
		{"negative", head + `{"step":-5}` + "\n", "-5", 3},
		{"2^53", head + `{"step":9007199254740992}` + "\n", "9007199254740992", 3},
		{"beyond int64", head + `{"step":99999999999999999999}` + "\n", "99999999999999999999", 3},
		{"exponent", head + `{"step":1e3}` + "\n", "1e3", 3},
		{"fraction", head + `{"step":2.0}` + "\n", "2.0", 3},
		{"string", head + `{"step":"4"}` + "\n", `"4"`, 3},
		{"object", head + `{"step":{"n":4}}` + "\n", `{"n":4}`, 3},
		{"then lines that are no step", head + `{"step":-1}` + "\n" + "null\n{}\n", "-1", 3},
		{"after long lines", fmt.Sprintf(long, 1) + fmt.Sprintf(long, 2) + "{}\n" + `{"step":-7}` + "\n" + `{"step":8,"x`, "-7", 4},
		{"long value", head + `{"step":"` + strings.Repeat("9", 100) + `"}` + "\n", `"` + strings.Repeat("9", 39) + "…", 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "steps.jsonl")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			n, ok, err := lastStep(path)
			if err == nil {
				t.Fatalf("lastStep = %d, %v; want an error", n, ok)
			}
			for _, want := range []string{fmt.Sprintf("%q", path), fmt.Sprintf("line %d,", tt.line), "has step " + tt.shown + ",", "from 0 to 9007199254740991", "fix or delete that line"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
	path := filepath.Join(t.TempDir(), "steps.jsonl")
	if err := os.WriteFile(path, []byte(`{"step":-5}`+"\n"+`{"step":6}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, ok, err := lastStep(path); n != 6 || !ok || err != nil {
		t.Fatalf("a bad step before the last: lastStep = %d, %v, %v; want 6", n, ok, err)
	}
}
