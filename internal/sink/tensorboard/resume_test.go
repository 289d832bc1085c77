package tensorboard

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit/sinkspec"
)

// writeRun writes rs as one run into out's tensorboard directory, the run's clock at now.
func writeRun(t *testing.T, out string, now time.Time, rs []*step.Record) string {
	t.Helper()
	set, err := decodeSettings(out, sinkspec.Parse(t, "sinks[1]", "tensorboard"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := openSettings(sink.Env{OutDir: out, MetricPrefix: "vllm", Resume: true}, set, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if err := w.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

// TestResumeOneStepAxis writes three runs into one out_dir, each continuing the steps of the
// one before: the second in the same second as the first, the third with the clock an hour
// back. TensorBoard reads a directory's event files in the order of their names as one run;
// read so, by this package's reader and by the independent one, the files hold one step axis
// that only goes up, every step once.
func TestResumeOneStepAxis(t *testing.T) {
	out := t.TempDir()
	rs := testRecords(9, nil)
	paths := []string{
		writeRun(t, out, t0, rs[:4]),
		writeRun(t, out, t0, rs[4:6]),
		writeRun(t, out, t0.Add(-time.Hour), rs[6:]),
	}
	files, _ := filepath.Glob(filepath.Join(out, "tensorboard", "events.out.tfevents.*"))
	slices.Sort(files)
	if !slices.Equal(files, paths) {
		t.Fatalf("event files in name order %v, want the order they were written %v", files, paths)
	}
	var steps, pySteps []int64
	for _, f := range files {
		evs := readEvents(t, f)
		if evs[0].FileVersion != fileVersion {
			t.Errorf("%s: first event %+v, want the file version", f, evs[0])
		}
		for _, ev := range evs[1:] {
			steps = append(steps, ev.Step)
		}
		for _, ev := range pythonRead(t, f)[1:] {
			pySteps = append(pySteps, ev.Step)
		}
	}
	want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8}
	if !slices.Equal(steps, want) {
		t.Errorf("steps across the files %v, want %v", steps, want)
	}
	if !slices.Equal(pySteps, want) {
		t.Errorf("independent reader: steps across the files %v, want %v", pySteps, want)
	}
}

// TestEventFileNames checks the names of new event files beside others.
func TestEventFileNames(t *testing.T) {
	host := hostname()
	for _, tt := range []struct {
		name     string
		existing []string
		want     string
	}{
		{"empty directory", nil, "events.out.tfevents.1000." + host},
		{"earlier file", []string{"events.out.tfevents.999." + host}, "events.out.tfevents.1000." + host},
		{"same second, same host", []string{"events.out.tfevents.1000." + host}, "events.out.tfevents.1000." + host + ".1"},
		{"clock went back", []string{"events.out.tfevents.2000." + host}, "events.out.tfevents.2001." + host},
		{"same second, a host that sorts after", []string{"events.out.tfevents.1000.~zzz"}, "events.out.tfevents.1001." + host},
		{"other files", []string{"notes.txt", "plots"}, "events.out.tfevents.1000." + host},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, n := range tt.existing {
				if err := writeFile(filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
			f, p, err := create(dir, time.Unix(1000, 0))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			if got := filepath.Base(p); got != tt.want {
				t.Errorf("new file %s, want %s", got, tt.want)
			}
		})
	}
}

func writeFile(path string) error { return os.WriteFile(path, nil, 0o644) }
