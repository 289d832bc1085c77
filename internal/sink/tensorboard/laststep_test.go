package tensorboard

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sink"
)

// TestLastStep reads the last step that a directory's event files hold, as a run does before
// it opens the sinks: the last summary event of the last file by name that has one, past a
// later file of no step, before a record a kill cut short, with images in the records.
func TestLastStep(t *testing.T) {
	out := t.TempDir()
	set := DefaultSettings(out)
	last := func() (sink.Held, bool) {
		t.Helper()
		h, ok, err := set.LastStep()
		if err != nil {
			t.Fatal(err)
		}
		return h, ok
	}
	if h, ok := last(); ok {
		t.Fatalf("no directory: %+v", h)
	}

	rs := testRecords(5, testPlots(t, out)) // steps 0-4, plots in step 1
	only0 := writeRun(t, out, t0, rs[:1])
	if h, ok := last(); !ok || h.Step != 0 || h.File != only0 {
		t.Fatalf("a file of step 0: %+v %v, want step 0 of %s", h, ok, only0)
	}
	rs[2].Step, rs[3].Step = 7, 1<<53-1
	second := writeRun(t, out, t0.Add(time.Minute), rs[1:4])
	writeRun(t, out, t0.Add(2*time.Minute), nil) // a run that wrote no step
	if h, ok := last(); !ok || h.Step != 1<<53-1 || h.File != second {
		t.Fatalf("%+v %v, want step 2^53-1 of %s", h, ok, second)
	}

	// Cut the last record in the middle: the step before it is the last; cut after step 1's
	// record, of images, and step 1 is.
	b, err := os.ReadFile(second)
	if err != nil {
		t.Fatal(err)
	}
	var ends []int
	for off := 0; off < len(b); off = ends[len(ends)-1] {
		ends = append(ends, off+16+int(le64(b[off:])))
	}
	if len(ends) != 4 || ends[3] != len(b) || ends[1]-ends[0] < 500 {
		t.Fatalf("records end at %v in %s, want the version and 3 steps, the first with images", ends, filepath.Base(second))
	}
	for _, tt := range []struct {
		size int
		want int64
	}{{(ends[2] + ends[3]) / 2, 7}, {ends[1], 1}, {ends[1] - 3, 0}} {
		if err := os.Truncate(second, int64(tt.size)); err != nil {
			t.Fatal(err)
		}
		want := second
		if tt.want == 0 {
			want = only0 // no step left in the second file
		}
		if h, ok := last(); !ok || h.Step != tt.want || h.File != want {
			t.Fatalf("cut at %d: %+v %v, want step %d of %s", tt.size, h, ok, tt.want, want)
		}
	}
}

func le64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}
