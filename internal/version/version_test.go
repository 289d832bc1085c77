package version

import (
	"regexp"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestNumber(t *testing.T) {
	// A release number as Python's packaging reads it too (PEP 440's release segment, with an
	// optional pre-release), with no stray whitespace from the file.
	if n := Number(); !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+((a|b|rc)[0-9]+)?$`).MatchString(n) {
		t.Errorf("Number() = %q, want a release number such as 0.1.0", n)
	}
}

func TestBuild(t *testing.T) {
	goLine := runtime.GOOS + "/" + runtime.GOARCH + ")"
	setting := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "vllmstat 1.2.3 (commit unknown; " + runtime.Version() + " " + goLine},
		{"no vcs settings", &debug.BuildInfo{GoVersion: "go1.99"}, "vllmstat 1.2.3 (commit unknown; go1.99 " + goLine},
		{"clean commit", &debug.BuildInfo{GoVersion: "go1.99", Settings: setting(
			"-trimpath", "true", "vcs", "git", "vcs.revision", "0123456789abcdef0123456789abcdef01234567", "vcs.modified", "false")},
			"vllmstat 1.2.3 (commit 0123456789abcdef0123456789abcdef01234567; go1.99 " + goLine},
		{"modified tree", &debug.BuildInfo{GoVersion: "go1.99", Settings: setting(
			"vcs.revision", "0123456789abcdef0123456789abcdef01234567", "vcs.modified", "true")},
			"vllmstat 1.2.3 (commit 0123456789abcdef0123456789abcdef01234567, modified; go1.99 " + goLine},
		{"modified without a revision says nothing of it", &debug.BuildInfo{GoVersion: "go1.99", Settings: setting("vcs.modified", "true")},
			"vllmstat 1.2.3 (commit unknown; go1.99 " + goLine},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo("1.2.3", tt.info).String(); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestCurrent(t *testing.T) {
	b := Current()
	if b.Number != Number() || b.Go == "" {
		t.Errorf("Current() = %+v", b)
	}
}
