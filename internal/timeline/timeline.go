// Package timeline writes and reads the per-step timeline files, OUT_DIR/timelines/step_NNNNNN.json:
// every worker's samples of a step with their offsets from the step start. It also resamples a
// series onto a fixed grid, which the plots, the terminal timelines and the report share.
package timeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/step"
)

// Dir is the folder of the timeline files inside OUT_DIR.
const Dir = "timelines"

// File is the content of one timeline file.
type File struct {
	Step    int64     `json:"step"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Workers []Worker  `json:"workers"`
}

// Worker is one worker's series, keyed by metric name without prefix.
type Worker struct {
	Target string `json:"target"`
	Engine string `json:"engine"`
	// Labels are the worker's worker labels (Ray's ReplicaId, WorkerId), absent when none.
	Labels map[string]string `json:"labels,omitempty"`
	// BusyS, IdleS and LastBusyS are the worker's step.Activity: absent when none of its samples
	// covered any time, and LastBusyS also when it was never busy.
	BusyS     *float64                `json:"busy_s,omitempty"`
	IdleS     *float64                `json:"idle_s,omitempty"`
	LastBusyS *float64                `json:"last_busy_s,omitempty"`
	Series    map[string][]step.Point `json:"series"`
}

// Activity returns the worker's busy and idle time, nil when the file has none for it.
func (w *Worker) Activity() *step.Activity {
	if w.BusyS == nil || w.IdleS == nil {
		return nil
	}
	a := &step.Activity{BusyS: *w.BusyS, IdleS: *w.IdleS}
	if w.LastBusyS != nil {
		a.LastBusyS = *w.LastBusyS
	}
	return a
}

// setActivity fills the activity fields from a, leaving them absent when a is nil.
func (w *Worker) setActivity(a *step.Activity) {
	if a == nil {
		return
	}
	w.BusyS, w.IdleS = &a.BusyS, &a.IdleS
	if a.BusyS > 0 {
		w.LastBusyS = &a.LastBusyS
	}
}

// ID names the worker as the step package does.
func (w *Worker) ID() step.WorkerID {
	return step.WorkerID{Target: w.Target, Engine: w.Engine, Labels: page.LabelKey(w.Labels)}
}

// DurationS is the step's length in seconds.
func (f *File) DurationS() float64 { return f.End.Sub(f.Start).Seconds() }

// Name is the file name of step n's timeline: step_000042.json.
func Name(n int64) string { return fmt.Sprintf("step_%06d.json", n) }

// Path is where step n's timeline lives under outDir.
func Path(outDir string, n int64) string { return filepath.Join(outDir, Dir, Name(n)) }

// FromRecord returns r's timeline as a File with its workers sorted by target, engine and
// worker labels.
// A record without a timeline gives a file without workers.
func FromRecord(r *step.Record) *File {
	f := &File{Step: r.Step, Start: r.Start, End: r.End, Workers: []Worker{}}
	if r.Timeline == nil {
		return f
	}
	for _, w := range r.Timeline.Workers {
		fw := Worker{Target: w.Target, Engine: w.Engine, Labels: w.LabelMap(), Series: w.Series}
		fw.setActivity(w.Activity)
		f.Workers = append(f.Workers, fw)
	}
	slices.SortStableFunc(f.Workers, func(a, b Worker) int { return a.ID().Compare(b.ID()) })
	return f
}

// Marshal encodes f as JSON with one series per line, so that files diff well. Map keys are
// sorted and numbers are written as encoding/json writes them, so equal files give equal bytes.
// Points whose offset or value is not finite are left out, since JSON cannot carry them.
func Marshal(f *File) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"step":`)
	b.WriteString(strconv.FormatInt(f.Step, 10))
	for _, t := range []struct {
		key string
		t   time.Time
	}{{"start", f.Start}, {"end", f.End}} {
		tb, err := t.t.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("marshal timeline of step %d: %w", f.Step, err)
		}
		b.WriteString(`,"` + t.key + `":`)
		b.Write(tb)
	}
	b.WriteString(`,"workers":[`)
	var num []byte
	for i, w := range f.Workers {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n{\"target\":")
		writeString(&b, w.Target)
		b.WriteString(`,"engine":`)
		writeString(&b, w.Engine)
		if len(w.Labels) > 0 {
			b.WriteString(`,"labels":{`)
			for j, name := range slices.Sorted(maps.Keys(w.Labels)) {
				if j > 0 {
					b.WriteByte(',')
				}
				writeString(&b, name)
				b.WriteByte(':')
				writeString(&b, w.Labels[name])
			}
			b.WriteByte('}')
		}
		for _, x := range []struct {
			key string
			v   *float64
		}{{"busy_s", w.BusyS}, {"idle_s", w.IdleS}, {"last_busy_s", w.LastBusyS}} {
			if x.v != nil && finite(*x.v) {
				num = appendFloat(append(num[:0], `,"`+x.key+`":`...), *x.v)
				b.Write(num)
			}
		}
		b.WriteString(`,"series":{`)
		names := make([]string, 0, len(w.Series))
		for name := range w.Series {
			names = append(names, name)
		}
		slices.Sort(names)
		for j, name := range names {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
			writeString(&b, name)
			b.WriteString(":[")
			first := true
			for _, p := range w.Series[name] {
				if !finite(p.OffsetS) || !finite(p.Value) {
					continue
				}
				if !first {
					b.WriteByte(',')
				}
				first = false
				num = appendFloat(append(num[:0], `{"t":`...), p.OffsetS)
				num = appendFloat(append(num, `,"v":`...), p.Value)
				b.Write(append(num, '}'))
			}
			b.WriteByte(']')
		}
		b.WriteString("}}")
	}
	b.WriteString("\n]}\n")
	return b.Bytes(), nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func writeString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always encodes
	b.Write(q)
}

// appendFloat formats x as encoding/json does: the shortest representation, with an exponent
// only for very small or very large magnitudes.
func appendFloat(b []byte, x float64) []byte {
	abs := math.Abs(x)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, x, format, -1, 64)
	if format == 'e' {
		// e-09 becomes e-9, as in encoding/json.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// Write writes r's timeline to outDir/timelines/step_NNNNNN.json and returns the file's path.
// The file appears whole or not at all: it is written under a temporary name and renamed.
func Write(outDir string, r *step.Record) (string, error) {
	data, err := Marshal(FromRecord(r))
	if err != nil {
		return "", err
	}
	path := Path(outDir, r.Step)
	if err := WriteFileAtomic(path, data); err != nil {
		return "", err
	}
	return path, nil
}

// WriteFileAtomic writes data to a temporary file beside path and renames it to path, creating
// the folder when needed, so that readers never see a partial file.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %q: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("create temporary file for %q: %w", path, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}

// Read reads and decodes one timeline file.
func Read(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Unmarshal(data)
}

// Unmarshal decodes a timeline file's content.
func Unmarshal(data []byte) (*File, error) {
	if f, err := decodeFast(data); err == nil {
		return f, nil
	}
	f, err := decodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("decode timeline: %w", err)
	}
	return f, nil
}

// Steps lists the step numbers that have a timeline file under outDir, in increasing order.
// A missing folder gives no steps and no error.
func Steps(outDir string) ([]int64, error) {
	entries, err := os.ReadDir(filepath.Join(outDir, Dir))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var steps []int64
	for _, e := range entries {
		if n, ok := parseName(e.Name()); ok && !e.IsDir() {
			steps = append(steps, n)
		}
	}
	slices.Sort(steps)
	return steps, nil
}

func parseName(name string) (int64, bool) {
	s, ok := strings.CutPrefix(name, "step_")
	if !ok {
		return 0, false
	}
	if s, ok = strings.CutSuffix(s, ".json"); !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}
