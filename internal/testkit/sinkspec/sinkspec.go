// Package sinkspec makes the entries of a config's sinks: list for the tests of sink types,
// decoded as the config parser decodes them. Only _test.go files import it. It is apart from
// testkit because it imports config, whose own dependencies' tests use testkit.
package sinkspec

import (
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config"
)

// Parse decodes doc, one entry of sinks: as a config file holds it (a bare type name, "wandb",
// or a mapping with a type key, "{type: wandb, project: rl}"), and gives it the key path that
// its problems are reported under (path, e.g. "sinks[2]").
func Parse(t testing.TB, path, doc string) config.SinkSpec {
	t.Helper()
	var s config.SinkSpec
	if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatalf("sink entry %q: %v", doc, err)
	}
	if s.Type == "" {
		t.Fatalf("sink entry %q: no sink type", doc)
	}
	s.Path = path
	return s
}
