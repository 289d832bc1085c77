package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/version"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var stdout, stderr bytes.Buffer
		if code := RunContext(context.Background(), args, &stdout, &stderr); code != exitOK || stderr.Len() > 0 {
			t.Fatalf("%q: exit %d, stderr %q", args, code, stderr.String())
		}
		if want := "vllmstat " + version.Number() + " (commit "; !strings.HasPrefix(stdout.String(), want) {
			t.Errorf("%q: %q, want it to start with %q", args, stdout.String(), want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := RunContext(context.Background(), []string{"version", "extra"}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "takes no arguments") {
		t.Errorf("version extra: exit %d, stderr %q", code, stderr.String())
	}
}
