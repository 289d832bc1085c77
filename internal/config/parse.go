package config

import (
	"cmp"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config/yamlx"
	"github.com/vllmstat/vllmstat/internal/target"
)

// loggerKeys are the NeMo-RL logger's keys, read from vllm_cfg and, in vllmstat's own
// section, beside its other keys.
var loggerKeys = []string{KeyEnable, KeyInterval, KeyScalars, KeyTimelines}

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
	p := &parser{c: &c, dir: dir}
	// Where vllmstat's own keys are: under vllmstat: when present; in a NeMo-RL file without
	// it, those of its top-level keys that are vllmstat's (the others are NeMo-RL's); else the
	// whole top level is vllmstat's.
	own, ownPath := root, ""
	switch {
	case get(root, "vllmstat") != nil:
		p.duplicates(root, "", "vllmstat", "vllm_cfg", "policy")
		own, ownPath = get(root, "vllmstat"), "vllmstat"
	case get(root, "policy") != nil:
		p.duplicates(root, "", "vllm_cfg", "policy") // the picked keys' are the decode's
		own = pick(root, ownKeys())
		p.nearMisses(root, "", ownKeys(), "the file's other top-level keys are NeMo-RL's, not read")
	}
	ownWhere := p.own(own, ownPath)
	// The logger keys: vllm_cfg at the top (or in vllmstat's section), else policy.generation.vllm_cfg.
	vc, vcPath := get(root, "vllm_cfg"), "vllm_cfg"
	if own != root && vc == nil {
		vc, vcPath = get(own, "vllm_cfg"), yamlx.Join(ownPath, "vllm_cfg")
	}
	if vc == nil {
		pol := get(root, "policy")
		gen := get(pol, "generation")
		p.duplicates(pol, "policy", "generation")
		p.duplicates(gen, "policy.generation", "vllm_cfg")
		if n := get(gen, "vllm_cfg"); n != nil {
			vc, vcPath = n, "policy.generation.vllm_cfg"
		}
	}
	if vc != nil {
		p.logger(vc, vcPath, ownWhere, ownPath)
	}
	if len(p.es) > 0 {
		// In the order of the file, whichever section a problem is in.
		slices.SortStableFunc(p.es, func(a, b yamlx.Error) int { return cmp.Compare(a.Line, b.Line) })
		return c, Problems(p.es.Strings(""))
	}
	return c, nil
}

// ownKeys are the keys of vllmstat's section, in the order Config declares them.
func ownKeys() []string {
	var keys []string
	for i := range reflect.TypeFor[Config]().NumField() {
		f := reflect.TypeFor[Config]().Field(i)
		if name, _, _ := cutTag(f.Tag.Get("yaml")); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return append(keys, "basic_auth", "authorization")
}

func cutTag(tag string) (name, opts string, ok bool) {
	for i := range len(tag) {
		if tag[i] == ',' {
			return tag[:i], tag[i+1:], true
		}
	}
	return tag, "", false
}

// pick returns a mapping of the entries of n whose keys are in keys.
func pick(n *yaml.Node, keys []string) *yaml.Node {
	out := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if slices.Contains(keys, n.Content[i].Value) {
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

// parser reads one file into c.
type parser struct {
	c   *Config
	dir string       // relative credentials and file_sd files are relative to it
	es  yamlx.Errors // with paths from the top of the file
}

func (p *parser) add(prefix string, es yamlx.Errors) {
	p.es = append(p.es, es.In(prefix)...)
}

// duplicates reports the keys of mapping n that this reads and that are given twice.
func (p *parser) duplicates(n *yaml.Node, prefix string, keys ...string) {
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	for _, e := range yamlx.Duplicates(n) {
		if slices.Contains(keys, e.Path) {
			p.add(prefix, yamlx.Errors{e})
		}
	}
}

// hooks decode the fields of other packages' types.
func (p *parser) hooks() map[reflect.Type]yamlx.Hook {
	st, sh := yamlx.HookFor(decodeSecret)
	tt, th := yamlx.HookFor(p.target)
	return map[reflect.Type]yamlx.Hook{st: sh, tt: th}
}

// own reads vllmstat's section n (at path) and returns where its keys were given.
func (p *parser) own(n *yaml.Node, path string) yamlx.Where {
	c := p.c
	w, es := yamlx.Decode(n, c, yamlx.Options{Ignore: []string{"vllm_cfg"}, Hooks: p.hooks()})
	p.add(path, es)
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Value != "vllm_cfg" {
			c.SetPath(k.Value, yamlx.Join(path, k.Value))
			c.lines[k.Value] = k.Line
		}
	}
	c.targetLines = nil
	for i := range len(c.Targets) {
		c.targetLines = append(c.targetLines, w.Line(fmt.Sprintf("targets[%d]", i)))
	}
	if a, es := resolveAuth(c.topCredentials.plain(), w, n, "basic_auth", p.dir); len(es) > 0 {
		p.add(path, es)
	} else {
		c.Auth = a
	}
	if h, es := resolveHosts(w); len(es) > 0 {
		p.add(path, es)
	} else {
		c.AuthHosts = h
	}
	c.topCredentials = topCredentials{} // as written: the secrets now live in Auth only
	for i := range c.Sinks {
		c.Sinks[i].Path = fmt.Sprintf("%s[%d]", yamlx.Join(path, "sinks"), i)
	}
	p.add(path, p.checks(w))
	return w
}

// checks are the rules of single values that a decode alone does not check; a value that
// breaks one is reported with its line and left at its default.
func (p *parser) checks(w yamlx.Where) yamlx.Errors {
	c, def := p.c, Default()
	var es yamlx.Errors
	if w.Has(KeyInterval) && !validInterval(c.Interval) {
		es = append(es, w.NotAllowed(KeyInterval, c.Interval, intervalRule))
		c.Interval = def.Interval
	}
	if w.Has("max_series_per_target") && c.MaxSeriesPerTarget <= 0 {
		es = append(es, w.NotAllowed("max_series_per_target", c.MaxSeriesPerTarget, "must be a whole number > 0"))
		c.MaxSeriesPerTarget = def.MaxSeriesPerTarget
	}
	if w.Has("max_workers_per_target") && c.MaxWorkersPerTarget <= 0 {
		es = append(es, w.NotAllowed("max_workers_per_target", c.MaxWorkersPerTarget, "must be a whole number > 0"))
		c.MaxWorkersPerTarget = def.MaxWorkersPerTarget
	}
	if w.Has("allow_targets") {
		c.AllowTargets, es = checkAllowTargets(w, es)
	}
	if w.Has("file_sd") {
		fs := c.FileSD[:0:0]
		for i, f := range c.FileSD {
			at := fmt.Sprintf("file_sd[%d]", i)
			if f == "" {
				es = append(es, w.Problem(at, "must be a file path or glob"))
				continue
			}
			if p.dir != "" && !filepath.IsAbs(f) {
				f = filepath.Join(p.dir, f)
			}
			if _, err := filepath.Match(f, ""); err != nil {
				es = append(es, w.NotAllowed(at, f, "must be a file path or a glob (*, ?, [...])"))
				continue
			}
			fs = append(fs, f)
		}
		c.FileSD = fs
	}
	return es
}

// logger reads the NeMo-RL logger keys of vllm_cfg mapping n and ignores the rest, which is
// NeMo-RL's, but for a key one typo away from a logger key. A logger key also given in
// vllmstat's section is a problem naming both places.
func (p *parser) logger(n *yaml.Node, path string, ownWhere yamlx.Where, ownPath string) {
	if n.Kind != yaml.MappingNode {
		p.add(path, yamlx.Problem(n, "must be a mapping"))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if o := ownWhere[k.Value]; o != nil && slices.Contains(loggerKeys, k.Value) {
			p.add(path, yamlx.Errors{{Path: k.Value, Line: k.Line,
				Msg: fmt.Sprintf("is given twice, also as %s (line %d): give it once", yamlx.Join(ownPath, k.Value), o.Line)}})
		}
	}
	p.nearMisses(n, path, loggerKeys, "vllm_cfg's other keys are NeMo-RL's, not read")
	w, es := yamlx.Decode(pick(n, loggerKeys), p.c, yamlx.Options{})
	p.add(path, es)
	for k := range w {
		p.c.SetPath(k, yamlx.Join(path, k))
		p.c.lines[k] = w.Line(k)
	}
	p.add(path, p.checks(w))
}

// nearMisses reports the keys of mapping n, a section shared with NeMo-RL whose other keys
// are not read, that are one or two letters away from one of keys: likely typos, which would
// otherwise be ignored.
func (p *parser) nearMisses(n *yaml.Node, path string, keys []string, why string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if slices.Contains(keys, k.Value) {
			continue
		}
		if s := yamlx.Suggest(k.Value, keys); s != "" {
			p.add(path, yamlx.Errors{{Path: k.Value, Line: k.Line, Msg: fmt.Sprintf("unknown key; did you mean %s? (%s)", s, why)}})
		}
	}
}

// decodeSecret reads a secret: any non-null scalar. Its problems never show it.
func decodeSecret(n *yaml.Node) (target.Secret, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return target.Secret{}, yamlx.Problem(n, "must be a non-empty string (its value is not shown)")
	}
	return target.NewSecret(n.Value), nil
}
