package readtest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/cli"
	"github.com/vllmstat/vllmstat/internal/step"
)

// TestDemoWritesWandb runs "vllmstat demo" with the wandb sink and checks with W&B's own reader
// that the offline run holds exactly the step records of steps.jsonl, then a clean exit.
func TestDemoWritesWandb(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := cli.Run([]string{"demo", "--steps", "2", "--servers", "1", "--dp", "2", "--speed", "6", "--interval", "0.2",
		"--sinks", "jsonl,wandb", "--out", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("demo exited %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var rs []*step.Record
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		r := &step.Record{}
		if err := json.Unmarshal(l, r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	files, _ := filepath.Glob(filepath.Join(out, "wandb", "offline-run-*", "run-*.wandb"))
	if len(files) != 1 {
		t.Fatalf("run files %v", files)
	}
	recs, err := readRun(files[0])
	if err != nil {
		t.Fatalf("W&B reader: %v", err)
	}
	if len(recs) < len(rs)+3 || recs[0].GetRun() == nil || recs[len(recs)-1].GetExit() == nil || recs[len(recs)-1].GetExit().GetExitCode() != 0 {
		t.Fatalf("%d records for %d steps; want run, one history per step, summary, exit", len(recs), len(rs))
	}
	var hist []int
	nfiles := 0
	for i, rec := range recs {
		switch {
		case rec.GetHistory() != nil:
			hist = append(hist, i)
		case rec.GetFiles() != nil:
			nfiles++ // the demo draws timeline plots: each step's images come as files
		}
	}
	if len(hist) != len(rs) || nfiles == 0 {
		t.Fatalf("%d history records for %d steps, %d files records", len(hist), len(rs), nfiles)
	}
	for i, r := range rs {
		other := checkHistory(t, recs[hist[i]].GetHistory(), r, rs[0].Start, false)
		for k, v := range other {
			if !strings.HasPrefix(k, "plots/") || !strings.Contains(v, "image-file") {
				t.Errorf("step %d: key %s = %s is not in steps.jsonl", r.Step, k, v)
			}
		}
	}
}
