// Package version is vllmstat's version: the release number, which a release bumps in the
// VERSION file beside this one, and the commit the binary was built from, which the Go
// toolchain stamps into it. The Python package (clients/python) reads the same VERSION file,
// so `vllmstat --version` and the package's __version__ cannot disagree.
package version

import (
	_ "embed"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

//go:embed VERSION
var number string

// Number is the release number, such as "0.1.0": what /healthz reports and what the Python
// client compares with its own.
func Number() string { return strings.TrimSpace(number) }

// Build describes one binary: its release number and what the toolchain stamped into it.
type Build struct {
	Number string
	// Revision is the commit the binary was built from; "" when the toolchain stamped none
	// (go run, go test, or a build outside a git checkout).
	Revision string
	// Modified reports that the work tree had changes the commit does not hold.
	Modified bool
	// Go is the toolchain's version.
	Go string
}

// Current is the running binary's Build.
func Current() Build {
	info, _ := debug.ReadBuildInfo()
	return fromBuildInfo(Number(), info)
}

// fromBuildInfo reads the vcs settings of info, which may be nil.
func fromBuildInfo(number string, info *debug.BuildInfo) Build {
	b := Build{Number: number, Go: runtime.Version()}
	if info == nil {
		return b
	}
	if info.GoVersion != "" {
		b.Go = info.GoVersion
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the line `vllmstat --version` prints, e.g.
// "vllmstat 0.1.0 (commit 3672e22…, modified; go1.26.8 linux/amd64)".
func (b Build) String() string {
	commit := "commit unknown"
	if b.Revision != "" {
		commit = "commit " + b.Revision
		if b.Modified {
			commit += ", modified"
		}
	}
	return fmt.Sprintf("vllmstat %s (%s; %s %s/%s)", b.Number, commit, b.Go, runtime.GOOS, runtime.GOARCH)
}
