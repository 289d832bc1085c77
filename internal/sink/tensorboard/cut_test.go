package tensorboard

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCutAfter cuts two runs' event files back to step 1, as a run resumed from step 1 does:
// the steps after it go, with their images, into files TensorBoard does not read; the version
// events and the steps up to 1 stay, and LastStep is then 1.
func TestCutAfter(t *testing.T) {
	out := t.TempDir()
	set := DefaultSettings(out)
	rs := testRecords(5, testPlots(t, out)) // steps 0-4, plots in step 1
	first := writeRun(t, out, t0, rs[:3])
	second := writeRun(t, out, t0.Add(time.Minute), rs[3:])
	steps := func(path string) string {
		var s []string
		for _, ev := range readEvents(t, path) {
			if ev.FileVersion != "" {
				s = append(s, "v")
			} else {
				s = append(s, fmt.Sprint(ev.Step))
			}
		}
		return strings.Join(s, " ")
	}
	if steps(first) != "v 0 1 2" || steps(second) != "v 3 4" {
		t.Fatalf("written: %s | %s", steps(first), steps(second))
	}
	cuts, err := set.CutAfter(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cuts) != 2 || cuts[0].File != first || cuts[0].Records != 1 || cuts[1].File != second || cuts[1].Records != 2 {
		t.Fatalf("cuts %+v", cuts)
	}
	for i, want := range []string{"v 0 1", "v"} {
		if got := steps(cuts[i].File); got != want {
			t.Errorf("%s holds %s, want %s", cuts[i].File, got, want)
		}
	}
	for i, want := range []string{"2", "3 4"} {
		side := cuts[i].Side
		if got := steps(side); got != want || strings.Contains(filepath.Base(side), "tfevents") || !strings.HasSuffix(side, ".cut-1") {
			t.Errorf("%s holds %s, want %s in a file TensorBoard does not read", side, got, want)
		}
	}
	if h, ok, err := set.LastStep(); err != nil || !ok || h.Step != 1 || h.File != first {
		t.Errorf("last step %+v %v %v, want 1 of %s", h, ok, err, first)
	}
	// Nothing after step 1 now; a second cut keeps what the first cut apart.
	if cuts, err := set.CutAfter(1); err != nil || len(cuts) != 0 {
		t.Errorf("a second cut: %+v, %v", cuts, err)
	}
	// A record a kill cut short stays at the file's end.
	b, _ := os.ReadFile(first)
	if err := os.WriteFile(first, append(b, 1, 2, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	if cuts, err := set.CutAfter(0); err != nil || len(cuts) != 1 {
		t.Fatalf("cut after 0: %+v, %v", cuts, err)
	}
	if b, _ := os.ReadFile(first); !strings.HasSuffix(string(b), "\x01\x02\x03") {
		t.Errorf("the cut-short bytes at the end were not kept")
	}
}
