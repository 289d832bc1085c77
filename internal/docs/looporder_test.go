package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// loopStage finds, in a line of a training loop, the stage it runs: the rollout, the policy's
// training, or the validation (eval).
var loopStage = []struct {
	name string
	re   *regexp.Regexp
}{
	{"rollout", regexp.MustCompile(`phase\("rollout"\)`)},
	{"train", regexp.MustCompile(`^\s*(\w+ = )?(policy\.)?train\(`)},
	{"eval", regexp.MustCompile(`phase\("eval"\)`)},
}

// loopOrder is the order of the stages in lines, each at its first line.
func loopOrder(lines []string) []string {
	var order []string
	for _, l := range lines {
		for _, s := range loopStage {
			if s.re.MatchString(l) && !strings.Contains(strings.Join(order, " "), s.name) {
				order = append(order, s.name)
			}
		}
	}
	return order
}

// TestLoopOrder: every training loop the pages and the examples show, with a rollout, training
// and an eval phase, runs them in NeMo-RL's GRPO order: rollouts, the policy's training, then,
// every few steps, validation (grpo_train validates after policy.train, before the step's
// logging). The README showed training before eval while rl-loop.md showed eval before training.
func TestLoopOrder(t *testing.T) {
	want := "rollout train eval"
	var loops []string
	for _, pg := range loadAll(t) {
		for _, b := range pg.blocks {
			if b.lang != "python" {
				continue
			}
			if o := loopOrder(b.body); len(o) == 3 {
				loops = append(loops, pg.path)
				if got := strings.Join(o, " "); got != want {
					t.Errorf("%s:%d: the loop runs %s, want %s", pg.path, b.line, got, want)
				}
			}
		}
	}
	examples, err := filepath.Glob(filepath.Join(root, "examples", "*.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range examples {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if o := loopOrder(strings.Split(string(src), "\n")); len(o) == 3 {
			loops = append(loops, "examples/"+filepath.Base(p))
			if got := strings.Join(o, " "); got != want {
				t.Errorf("examples/%s: the loop runs %s, want %s", filepath.Base(p), got, want)
			}
		}
	}
	for _, p := range []string{"README.md", "docs/rl-loop.md", "examples/plain_loop.py", "examples/nemo_rl_grpo.py"} {
		if !strings.Contains(strings.Join(loops, " "), p) {
			t.Errorf("no loop of rollout, training and eval found in %s (found in %q)", p, loops)
		}
	}
}
