package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestResumeFrom reads resume_from: a step number from 0 to 2^53-1, unset by default; anything
// else is a problem naming the key and its line.
func TestResumeFrom(t *testing.T) {
	if Default().ResumeFrom != nil {
		t.Fatal("resume_from is set by default")
	}
	for _, tt := range []struct {
		yaml string
		want int64
		bad  string
	}{
		{"resume_from: 0", 0, ""},
		{"resume_from: 12", 12, ""},
		{"resume_from: 9007199254740991", 1<<53 - 1, ""},
		{"resume_from: -1", 0, "resume_from: -1 is not allowed: must be a step number from 0 to 2^53-1"},
		{"resume_from: 9007199254740992", 0, "resume_from: 9007199254740992 is not allowed"},
		{"resume_from: 1.5", 0, "resume_from (line 2): \"1.5\" is not allowed: must be a whole number"},
		{"resume_from: latest", 0, "resume_from (line 2): \"latest\" is not allowed: must be a whole number"},
		// Step numbers are decimal: YAML 1.1 reads 010 as octal 8, which cut steps 9 and 10.
		{"resume_from: 010", 10, ""},
		{"resume_from: 000120", 120, ""},
		{"resume_from: 08", 8, ""},
		{"resume_from: 0x8", 0, "resume_from (line 2): \"0x8\" is not allowed: must be a whole number in decimal digits: 0x, 0b and 0o prefixes are not read"},
		{"resume_from: 0b1000", 0, "resume_from (line 2): \"0b1000\" is not allowed: must be a whole number in decimal digits"},
		{"resume_from: 0o10", 0, "resume_from (line 2): \"0o10\" is not allowed: must be a whole number in decimal digits"},
		{"resume_from: 1_0", 0, "resume_from (line 2): \"1_0\" is not allowed: must be a whole number in decimal digits"},
	} {
		c, err := Parse([]byte("targets: [h:8000]\n" + tt.yaml + "\n"))
		if err == nil {
			err = c.Validate()
		}
		switch {
		case tt.bad == "" && err != nil:
			t.Errorf("%s: %v", tt.yaml, err)
		case tt.bad == "" && (c.ResumeFrom == nil || *c.ResumeFrom != tt.want):
			got := "unset"
			if c.ResumeFrom != nil {
				got = fmt.Sprint(*c.ResumeFrom)
			}
			t.Errorf("%s: resume_from %s, want %d", tt.yaml, got, tt.want)
		case tt.bad != "" && (err == nil || !strings.Contains(err.Error(), tt.bad) || !strings.Contains(err.Error(), "line 2")):
			t.Errorf("%s: error %v, want %q", tt.yaml, err, tt.bad)
		}
	}
}
