package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/scrape"
)

// ownKeys are vllmstat's own keys; any other key in its section is an error (a typo would
// otherwise be silently ignored).
var ownKeys = []string{"targets", "basic_auth", "authorization", "step_every", "scrape_timeout", "out_dir", "metric_prefix",
	"per_worker", "record", "max_body_bytes", "max_series_per_target", "max_workers_per_target", "worker_labels", "sinks", "record_timelines",
	"terminal_timelines", "listen", "api_token", "metrics_public", "allow_insecure_listen", "file_sd", "refresh_interval",
	"dns_server", "vllm_cfg"}

// Parse reads a YAML document over the defaults and reports every problem at once. Credentials
// files it names are read once here, to report a missing or empty one at start; relative ones
// are relative to the working directory (Load makes them relative to the file's).
func Parse(b []byte) (Config, error) { return parse(b, "") }

func parse(b []byte, dir string) (Config, error) {
	c := Default()
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return c, Problems{fmt.Sprintf("not valid YAML: %v", err)}
	}
	if len(doc.Content) == 0 {
		return c, nil // an empty file: all defaults
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return c, Problems{fmt.Sprintf("line %d: the file must be a mapping of keys to values", root.Line)}
	}
	d := decoder{c: &c, dir: dir}
	// Where vllmstat's own keys are: under vllmstat: when present; nowhere in a NeMo-RL file
	// without it (its other keys belong to NeMo-RL); else the top level is vllmstat's.
	own, ownPath := root, ""
	if n := get(root, "vllmstat"); n != nil {
		own, ownPath = n, "vllmstat."
	} else if get(root, "policy") != nil {
		own = nil
		// A NeMo-RL file may still carry vllmstat's keys at its top: read those, leave the rest.
		d.own(pick(root, ownKeys), "")
	}
	if own != nil {
		if own.Kind != yaml.MappingNode {
			d.problem(own, strings.TrimSuffix(ownPath, "."), "must be a mapping")
		} else {
			d.own(own, ownPath)
		}
	}
	// The logger keys: vllm_cfg at the top (or in vllmstat's section), else policy.generation.vllm_cfg.
	vc, vcPath := get(root, "vllm_cfg"), "vllm_cfg."
	if own != nil && own != root && vc == nil {
		vc, vcPath = get(own, "vllm_cfg"), ownPath+"vllm_cfg."
	}
	if vc == nil {
		if n := get(get(get(root, "policy"), "generation"), "vllm_cfg"); n != nil {
			vc, vcPath = n, "policy.generation.vllm_cfg."
		}
	}
	if vc != nil {
		d.logger(vc, vcPath)
	}
	if len(d.ps) > 0 {
		return c, d.ps
	}
	return c, nil
}

// pick returns a mapping of the entries of n whose keys are in keys (vllm_cfg excepted: Parse
// reads it).
func pick(n *yaml.Node, keys []string) *yaml.Node {
	out := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; k != "vllm_cfg" && slices.Contains(keys, k) {
			out.Content = append(out.Content, n.Content[i], n.Content[i+1])
		}
	}
	return out
}

// get returns the value of key in mapping n, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

type decoder struct {
	c   *Config
	dir string // relative credentials files are relative to it
	ps  Problems
}

func (d *decoder) problem(n *yaml.Node, path, msg string) {
	d.ps = append(d.ps, fmt.Sprintf("%s (line %d): %s", path, n.Line, msg))
}

func (d *decoder) bad(n *yaml.Node, path, allowed string) {
	d.problem(n, path, fmt.Sprintf("%q is not allowed: %s", n.Value, allowed))
}

func (d *decoder) own(n *yaml.Node, prefix string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := prefix + k.Value
		d.c.SetPath(k.Value, path)
		switch k.Value {
		case "targets":
			d.targets(v, path)
		case "basic_auth", "authorization":
			// read below, together, to check that only one is given
		case "step_every":
			d.duration(v, path, &d.c.StepEvery)
		case "scrape_timeout":
			d.duration(v, path, &d.c.ScrapeTimeout)
		case "out_dir":
			d.str(v, path, &d.c.OutDir)
		case "metric_prefix":
			d.str(v, path, &d.c.MetricPrefix)
		case "record":
			d.str(v, path, &d.c.Record)
		case "per_worker":
			d.boolean(v, path, &d.c.PerWorker)
		case "max_body_bytes":
			var x int64
			if v.Kind != yaml.ScalarNode || v.Decode(&x) != nil {
				d.bad(v, path, "must be a whole number of bytes")
				continue
			}
			d.c.MaxBodyBytes = x
		case "max_series_per_target":
			d.count(v, path, &d.c.MaxSeriesPerTarget)
		case "max_workers_per_target":
			d.count(v, path, &d.c.MaxWorkersPerTarget)
		case "worker_labels":
			d.labels(v, path, &d.c.WorkerLabels)
		case "metrics_public":
			d.boolean(v, path, &d.c.MetricsPublic)
		case "record_timelines":
			d.boolean(v, path, &d.c.RecordTimelines)
		case "terminal_timelines":
			d.boolean(v, path, &d.c.TerminalTimelines)
		case "listen":
			d.str(v, path, &d.c.Listen)
		case "api_token":
			var tok string
			d.str(v, path, &tok) // its problems never quote the value
			d.c.APIToken = scrape.NewSecret(tok)
		case "allow_insecure_listen":
			d.boolean(v, path, &d.c.AllowInsecureListen)
		case "sinks":
			d.sinks(v, path)
		case "file_sd":
			d.fileSD(v, path)
		case "refresh_interval":
			d.duration(v, path, &d.c.RefreshInterval)
		case "dns_server":
			d.str(v, path, &d.c.DNSServer)
		case "vllm_cfg":
			// read by Parse
		default:
			d.problem(k, path, fmt.Sprintf("unknown key; vllmstat's keys are %s", strings.Join(ownKeys, ", ")))
		}
	}
	if a, ok := d.auth(n, prefix); ok {
		d.c.Auth = a
	}
}

// logger reads the NeMo-RL logger keys and ignores the rest of vllm_cfg, which is NeMo-RL's.
func (d *decoder) logger(n *yaml.Node, prefix string) {
	if n.Kind != yaml.MappingNode {
		d.problem(n, strings.TrimSuffix(prefix, "."), "must be a mapping")
		return
	}
	for _, key := range []string{KeyEnable, KeyScalars, KeyTimelines, KeyInterval} {
		v := get(n, key)
		if v == nil {
			continue
		}
		path := prefix + key
		d.c.SetPath(key, path)
		switch key {
		case KeyEnable:
			d.boolean(v, path, &d.c.Enabled)
		case KeyScalars:
			d.boolean(v, path, &d.c.LogScalars)
		case KeyTimelines:
			d.boolean(v, path, &d.c.TimelinePlots)
		case KeyInterval:
			f, err := strconv.ParseFloat(v.Value, 64)
			if v.Kind != yaml.ScalarNode || err != nil || !(f >= MinInterval) || f > 3600 {
				d.bad(v, path, intervalRule)
				continue
			}
			d.c.Interval = f
		}
	}
}

func (d *decoder) boolean(v *yaml.Node, path string, dst *bool) {
	var b bool
	if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&b) != nil {
		d.bad(v, path, "must be true or false")
		return
	}
	*dst = b
}

func (d *decoder) str(v *yaml.Node, path string, dst *string) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		d.problem(v, path, "must be a string")
		return
	}
	*dst = v.Value
}

// count reads a whole number > 0.
func (d *decoder) count(v *yaml.Node, path string, dst *int) {
	var x int
	if v.Kind != yaml.ScalarNode || v.Decode(&x) != nil || x <= 0 {
		d.bad(v, path, "must be a whole number > 0")
		return
	}
	*dst = x
}

// labels reads a list of label names; an empty list is kept as one (not nil).
func (d *decoder) labels(v *yaml.Node, path string, dst *[]string) {
	if v.Kind != yaml.SequenceNode {
		d.problem(v, path, "must be a list of label names, e.g. [ReplicaId, WorkerId] ([] for none)")
		return
	}
	out := make([]string, 0, len(v.Content))
	for i, n := range v.Content {
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			d.problem(n, fmt.Sprintf("%s[%d]", path, i), "must be a label name")
			return
		}
		out = append(out, n.Value)
	}
	*dst = out
}

// duration accepts Go durations ("30s", "1m30s") and plain numbers of seconds.
func (d *decoder) duration(v *yaml.Node, path string, dst *time.Duration) {
	if v.Kind == yaml.ScalarNode {
		if f, err := strconv.ParseFloat(v.Value, 64); err == nil && f >= 0 {
			*dst = time.Duration(f * float64(time.Second))
			return
		}
		if x, err := time.ParseDuration(v.Value); err == nil && x >= 0 {
			*dst = x
			return
		}
	}
	d.bad(v, path, "must be a duration such as 30s, 500ms or 1m, or a number of seconds")
}

// sinks reads a list whose entries are a sink type ("tensorboard") or a mapping with a type key
// and the sink's settings ({type: wandb, project: rl}).
func (d *decoder) sinks(v *yaml.Node, path string) {
	if v.Kind != yaml.SequenceNode {
		d.problem(v, path, "must be a list of sinks, e.g. [jsonl, tensorboard, wandb]")
		return
	}
	for i, e := range v.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch e.Kind {
		case yaml.ScalarNode:
			d.c.Sinks = append(d.c.Sinks, SinkSpec{Type: e.Value, Path: p})
		case yaml.MappingNode:
			t := get(e, "type")
			if t == nil || t.Kind != yaml.ScalarNode || t.Value == "" {
				d.problem(e, p, "a sink with settings needs a type key, e.g. {type: wandb, project: rl}")
				continue
			}
			d.c.Sinks = append(d.c.Sinks, SinkSpec{Type: t.Value, Path: p, Settings: e})
		default:
			d.problem(e, p, "must be a sink type or a mapping with a type key")
		}
	}
}
