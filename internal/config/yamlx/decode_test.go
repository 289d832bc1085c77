package yamlx

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type inner struct {
	Name  string `yaml:"name"`
	Token string `yaml:"token" secret:"true"`
}

type shared struct {
	Images bool `yaml:"images"`
}

type sample struct {
	Count  int            `yaml:"count"`
	Rate   float64        `yaml:"rate"`
	Every  time.Duration  `yaml:"every"`
	Tags   []string       `yaml:"tags" want:"a list of tags" item:"a tag"`
	Labels map[string]int `yaml:"labels"`
	Inner  *inner         `yaml:"inner"`
	shared `yaml:",inline"`
	Odd    odd `yaml:"odd"`
	//lint:ignore U1000 an unexported field the decoder must skip
	hidden string
}

// odd decodes itself: an odd whole number.
type odd int

func (o *odd) UnmarshalYAML(n *yaml.Node) error {
	var x int
	if n.Decode(&x) != nil || x%2 == 0 {
		return NotAllowed(n, "must be an odd number")
	}
	*o = odd(x)
	return nil
}

func node(t *testing.T, doc string) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatal(err)
	}
	return n.Content[0]
}

func TestDecodeGood(t *testing.T) {
	s := sample{Count: 7, Rate: 1}
	w, es := Decode(node(t, "count: 3\nevery: 1.5\ntags: [a, b]\nlabels: {x: 1}\ninner: {name: n}\nimages: true\nodd: 5\n"), &s, Options{})
	if len(es) > 0 {
		t.Fatal(es)
	}
	if s.Count != 3 || s.Rate != 1 || s.Every != 1500*time.Millisecond || strings.Join(s.Tags, ",") != "a,b" || s.Labels["x"] != 1 ||
		s.Inner == nil || s.Inner.Name != "n" || !s.Images || s.Odd != 5 {
		t.Errorf("decoded %+v", s)
	}
	if w.Line("tags[1]") != 3 || w.Line("inner.name") != 5 || w.Has("rate") {
		t.Errorf("where: tags[1] line %d, inner.name line %d, rate given %v", w.Line("tags[1]"), w.Line("inner.name"), w.Has("rate"))
	}
}

// TestDecodeReportsEverything: every problem of a document at once, with paths and lines, and
// the fields with problems left as they were.
func TestDecodeReportsEverything(t *testing.T) {
	doc := `count: many
rate: [1]
every: -3s
tags: x
labels: {a: 1, b: two}
inner: {name: n, nmae: m, token: [s3cret]}
imagse: true
odd: 4
count: 2
`
	s := sample{Count: 7}
	_, es := Decode(node(t, doc), &s, Options{})
	got := strings.Join(es.Strings("top"), "\n")
	for _, want := range []string{
		`top.count (line 1): "many" is not allowed: must be a whole number`,
		`top.rate (line 2): a list is not allowed: must be a number`,
		`top.every (line 3): "-3s" is not allowed: must be a duration such as 30s`,
		`top.tags (line 4): must be a list of tags`,
		`top.labels.b (line 5): "two" is not allowed: must be a whole number`,
		`top.inner.nmae (line 6): unknown key; the keys here are name, token; did you mean name?`,
		`top.inner.token (line 6): must be a string (its value is not shown)`,
		`top.imagse (line 7): unknown key; the keys here are count, rate, every, tags, labels, inner, images, odd; did you mean images?`,
		`top.odd (line 8): "4" is not allowed: must be an odd number`,
		`top.count (line 9): is given twice, at lines 1 and 9`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if len(es) != 10 {
		t.Errorf("%d problems, want 10:\n%s", len(es), got)
	}
	if strings.Contains(got, "s3cret") {
		t.Errorf("a secret is shown:\n%s", got)
	}
	if s.Count != 7 {
		t.Errorf("count %d: a refused value replaced the default", s.Count)
	}
	var target Errors
	if !errors.As(error(es), &target) {
		t.Error("Errors is not an error")
	}
}

func TestDecodeOptions(t *testing.T) {
	var s sample
	_, es := Decode(node(t, "type: x\nother: 1\n"), &s, Options{Ignore: []string{"type"}})
	if len(es) != 1 || !strings.HasPrefix(es[0].At(""), "other (line 2): unknown key; the keys here are type, count,") {
		t.Errorf("ignore: %v", es)
	}
	_, es = Decode(node(t, "type: x\nother: 1\ninner: {x: 1}\n"), &s, Options{Open: true})
	if len(es) != 1 || es[0].Path != "inner.x" {
		t.Errorf("open: unknown keys of nested mappings are still problems, got %v", es)
	}
	_, es = Decode(node(t, "[1, 2]"), &s, Options{})
	if len(es) != 1 || es[0].At("s") != "s (line 1): must be a mapping" {
		t.Errorf("not a mapping: %v", es)
	}
}

func TestSuggest(t *testing.T) {
	keys := []string{"step_every", "scrape_timeout", "images", "url", "per_worker"}
	for key, want := range map[string]string{
		"step_evry": "step_every", "imagse": "images", "scrape_timout": "scrape_timeout", "uri": "url",
		"perworker": "per_worker", "colour": "", "x": "", "interval": "",
	} {
		if got := Suggest(key, keys); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", key, got, want)
		}
	}
}
