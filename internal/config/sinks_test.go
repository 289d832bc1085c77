package config_test

import (
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/run"
)

// TestSinkProblemsWithTheOthers: a file with a typo at the top and problems in its sinks gets
// them all from Load and Validate with the sink types' check, each sink's problem at its place
// in the file's list, though an entry before it could not be read.
func TestSinkProblemsWithTheOthers(t *testing.T) {
	c, err := config.Load("testdata/sinks.bad.yaml")
	if err == nil {
		t.Fatal("accepted")
	}
	if len(c.Sinks) != 2 || c.Sinks[0].Path != "sinks[1]" || c.Sinks[0].Line != 7 || c.Sinks[1].Path != "sinks[2]" || c.Sinks[1].Line != 8 {
		t.Errorf("sinks %+v: want sinks[1] at line 7 and sinks[2] at line 8", c.Sinks)
	}
	all := err.Error()
	if err := c.Validate(run.CheckSinks); err != nil {
		all += "\n" + err.Error()
	}
	for _, want := range []string{
		"scrape_timout (line 4): unknown key",
		"sinks[0] (line 6): a sink with settings needs a type key",
		`sinks[1] (line 7): unknown sink type "tensorbaord"; known: csv, jsonl, otlp, remote_write, tensorboard, wandb; did you mean tensorboard?`,
		"sinks[2].kyes (line 8): unknown setting of a csv sink: the settings are type, keys, include, exclude, path; did you mean keys?",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
}

// TestValidateRunsChecks: a check's problems come after Validate's own, with them.
func TestValidateRunsChecks(t *testing.T) {
	c := config.Default()
	c.MaxBodyBytes = 0
	err := c.Validate(func(config.Config) error { return config.Problems{"sinks[0]: checked"} })
	ps, ok := err.(config.Problems)
	if !ok || len(ps) != 2 || !strings.HasPrefix(ps[0], "max_body_bytes") || ps[1] != "sinks[0]: checked" {
		t.Errorf("Validate = %v: want max_body_bytes's problem, then the check's", err)
	}
}
