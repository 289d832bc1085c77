package csvfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCutAfter cuts steps.csv back to step 2: the rows of steps 3 and 4 go to steps.csv.cut-1,
// the header stays, and the last step is then 2.
func TestCutAfter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "steps.csv")
	if err := os.WriteFile(path, []byte("step,end,x\n1,a,1\n2,b,2\n3,c,3\n4,d,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	set := Settings{Path: path}
	cuts, err := set.CutAfter(2)
	if err != nil || len(cuts) != 1 || cuts[0].File != path || cuts[0].Side != path+".cut-1" || cuts[0].Records != 2 {
		t.Fatalf("CutAfter(2) = %+v, %v", cuts, err)
	}
	for file, want := range map[string]string{path: "step,end,x\n1,a,1\n2,b,2\n", path + ".cut-1": "3,c,3\n4,d,4\n"} {
		if b, err := os.ReadFile(file); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", file, b, err, want)
		}
	}
	if h, ok, err := set.LastStep(); err != nil || !ok || h.Step != 2 {
		t.Errorf("last step %+v %v %v, want 2", h, ok, err)
	}
}
