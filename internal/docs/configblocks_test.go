package docs

import (
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config"
	vsrun "github.com/vllmstat/vllmstat/internal/run"
)

// TestSinksExamples loads the sinks: of every YAML block of the pages that has one, as a run
// checks them at start: each entry's type and settings, so that an example shows settings that
// exist with values that are allowed. The rest of a block (its targets, often elided with
// "...") is not loaded.
func TestSinksExamples(t *testing.T) {
	n := 0
	for _, pg := range loadAll(t) {
		for _, b := range pg.blocks {
			if b.lang != "yaml" && b.lang != "yml" {
				continue
			}
			where := fmt.Sprintf("%s:%d", pg.path, b.line)
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte(strings.Join(b.body, "\n")), &doc); err != nil {
				t.Errorf("%s: not YAML: %v", where, err)
				continue
			}
			if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
				continue
			}
			top := doc.Content[0]
			var sinks *yaml.Node
			for i := 0; i+1 < len(top.Content); i += 2 {
				if top.Content[i].Value == "sinks" {
					sinks = &yaml.Node{Kind: yaml.MappingNode, Content: top.Content[i : i+2]}
				}
			}
			if sinks == nil {
				continue
			}
			n++
			src, err := yaml.Marshal(sinks)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse(src)
			if err == nil {
				err = vsrun.CheckSinks(cfg)
			}
			if err != nil {
				t.Errorf("%s: the example's sinks are refused:\n%v\n%s", where, err, src)
			}
		}
	}
	if n < 5 {
		t.Errorf("found %d examples of sinks:, want the docs' (at least 5)", n)
	}
}
