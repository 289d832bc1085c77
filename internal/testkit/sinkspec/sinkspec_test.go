package sinkspec

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestParse(t *testing.T) {
	bare := Parse(t, "sinks[0]", "wandb")
	if bare.Type != "wandb" || bare.Path != "sinks[0]" || bare.Settings != nil {
		t.Errorf("bare name: %+v", bare)
	}
	s := Parse(t, "sinks[2]", "type: csv\nkeys: [vllm/a]\n")
	if s.Type != "csv" || s.Path != "sinks[2]" || s.Settings == nil || s.Settings.Kind != yaml.MappingNode {
		t.Fatalf("mapping: %+v", s)
	}
	var set struct {
		Keys []string `yaml:"keys"`
	}
	if w, es := s.Decode(&set); len(es) > 0 || len(set.Keys) != 1 || set.Keys[0] != "vllm/a" || w.Line("keys") != 2 {
		t.Errorf("decoded %+v, %v, where %v", set, es, w)
	}
}
