package cli

import (
	"flag"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/config"
)

// TestFlagDefaultsAreConfigDefaults: the run flags' defaults are config.Default()'s, so that
// --help tells what a run without a file and flags does.
func TestFlagDefaultsAreConfigDefaults(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f runFlags
	f.register(fs)
	def := config.Default()
	for name, want := range map[string]string{
		"interval":      strconv.FormatFloat(def.Interval, 'g', -1, 64),
		"step-every":    def.StepEvery.String(),
		"out":           def.OutDir,
		"metric-prefix": def.MetricPrefix,
		"per-worker":    strconv.FormatBool(def.PerWorker),
		"log-scalars":   strconv.FormatBool(def.LogScalars),
		"listen":        def.Listen,
		"record":        def.Record,
		"worker-labels": strings.Join(def.WorkerLabels, ","),
	} {
		if got := fs.Lookup(name).DefValue; got != want {
			t.Errorf("--%s default %q, config.Default() %q", name, got, want)
		}
	}
	// Loaded without a file or flags, the configuration is the default one.
	c, err := f.load(fs)
	if err != nil {
		t.Fatal(err)
	}
	if c.Interval != def.Interval || c.StepEvery != 30*time.Second || c.OutDir != def.OutDir || c.Listen != def.Listen {
		t.Errorf("loaded %+v", c)
	}
}
