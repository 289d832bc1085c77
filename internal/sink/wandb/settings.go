package wandb

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config"
)

// settings are what a wandb entry of sinks: may set.
type settings struct {
	// project, entity, group and name are the run's; an empty entity means the default entity
	// of whoever runs wandb sync.
	project, entity, group, name string
	// runID names the run and its files; default 8 random characters [a-z0-9] as W&B makes them.
	runID string
	// config is the run config, one item per top-level key, values as JSON.
	config []item
	// images copies the step's plots into the run and logs them as images.
	images bool
	// perWorker adds one history key per worker and metric, "<key>/<worker>".
	perWorker bool
}

const allowedKeys = "type, project, entity, group, name, run_id, config, images, per_worker"

// forbidden are the characters W&B refuses in project names and run ids.
const forbidden = `/\#?%:`

// decodeSettings reads spec's mapping strictly and reports every problem at once, each with its
// key path, so that a typo fails the start instead of being ignored.
func decodeSettings(spec config.SinkSpec) (settings, error) {
	s := settings{project: "vllmstat", images: true}
	n := spec.Settings
	if n != nil && n.Kind != yaml.MappingNode {
		return s, config.Problems{fmt.Sprintf("%s (line %d): must be a mapping such as {type: wandb, project: rl}", spec.Path, n.Line)}
	}
	var ps config.Problems
	for i := 0; n != nil && i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := spec.Path + "." + k.Value
		bad := func(allowed string) {
			ps = append(ps, fmt.Sprintf("%s (line %d): %s is not allowed: %s", path, v.Line, show(v), allowed))
		}
		str := func(dst *string, allowed string, ok func(string) bool) {
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || !ok(v.Value) {
				bad(allowed)
				return
			}
			*dst = v.Value
		}
		switch k.Value {
		case "type":
		case "project":
			str(&s.project, "must be a W&B project name: not empty, at most 128 characters, none of "+forbidden, validName)
		case "run_id":
			str(&s.runID, "must be a W&B run id: not empty, at most 128 characters, no spaces, none of "+forbidden, validName)
		case "entity":
			str(&s.entity, "must be a W&B entity (user or team) name", func(string) bool { return true })
		case "group":
			str(&s.group, "must be a string, e.g. the trainer's run group", func(string) bool { return true })
		case "name":
			str(&s.name, "must be a string, the run's display name", func(string) bool { return true })
		case "images", "per_worker":
			var b bool
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&b) != nil {
				bad("must be true or false")
				continue
			}
			if k.Value == "images" {
				s.images = b
			} else {
				s.perWorker = b
			}
		case "config":
			if v.Kind != yaml.MappingNode {
				bad("must be a mapping of config keys to values, e.g. {model: qwen3-8b, lr: 1e-6}")
				continue
			}
			items, bads := configItems(v, path)
			s.config = items
			ps = append(ps, bads...)
		default:
			ps = append(ps, fmt.Sprintf("%s (line %d): unknown setting of a wandb sink: the settings are %s", path, k.Line, allowedKeys))
		}
	}
	if len(ps) > 0 {
		return s, ps
	}
	if s.runID == "" {
		s.runID = randomID()
	}
	return s, nil
}

func validName(s string) bool {
	return s != "" && len(s) <= 128 && !strings.ContainsAny(s, forbidden+" \t\r\n")
}

// configItems turns a mapping into one config item per top-level key, in file order.
func configItems(v *yaml.Node, path string) ([]item, config.Problems) {
	var items []item
	var ps config.Problems
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		p := fmt.Sprintf("%s.%s (line %d)", path, k.Value, k.Line)
		if seen[k.Value] {
			ps = append(ps, p+": is given twice")
			continue
		}
		seen[k.Value] = true
		var x any
		if err := val.Decode(&x); err != nil {
			ps = append(ps, fmt.Sprintf("%s: %s is not allowed: %v", p, show(val), err))
			continue
		}
		b, err := json.Marshal(x)
		if err != nil {
			ps = append(ps, fmt.Sprintf("%s: %s is not allowed: must be representable in JSON (%v)", p, show(val), err))
			continue
		}
		items = append(items, item{k.Value, string(b)})
	}
	return items, ps
}

// randomID makes a run id as W&B does: 8 characters of [a-z0-9]. It names files, so it needs
// to be unlikely to repeat, not unpredictable.
func randomID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 8)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

// show quotes a scalar and names any other node, for messages.
func show(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", v.Value)
}
