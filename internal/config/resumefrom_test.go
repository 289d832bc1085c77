package config

import (
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
	} {
		c, err := Parse([]byte("targets: [h:8000]\n" + tt.yaml + "\n"))
		if err == nil {
			err = c.Validate()
		}
		switch {
		case tt.bad == "" && err != nil:
			t.Errorf("%s: %v", tt.yaml, err)
		case tt.bad == "" && (c.ResumeFrom == nil || *c.ResumeFrom != tt.want):
			t.Errorf("%s: resume_from %v, want %d", tt.yaml, c.ResumeFrom, tt.want)
		case tt.bad != "" && (err == nil || !strings.Contains(err.Error(), tt.bad) || !strings.Contains(err.Error(), "line 2")):
			t.Errorf("%s: error %v, want %q", tt.yaml, err, tt.bad)
		}
	}
}
