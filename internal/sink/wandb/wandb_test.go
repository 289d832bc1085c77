package wandb

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/appendlog"
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
	"github.com/vllmstat/vllmstat/internal/testkit/sinkspec"
)

// The W&B reader's view of these files is tested in readtest/, a module of its own that
// brings in W&B's code. The tests here cover settings, errors and the framing's invariants.

var t0 = time.Date(2025, 7, 1, 12, 0, 0, 5000, time.UTC)

func TestSettings(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		check     func(Settings) bool
		errs      []string
	}{
		{name: "bare name", doc: "wandb", check: func(s Settings) bool {
			return s.Project == "vllmstat" && s.Images && !s.PerWorker && len(s.RunID) == 8 && strings.Trim(s.RunID, "abcdefghijklmnopqrstuvwxyz0123456789") == ""
		}},
		{name: "all keys", doc: `{type: wandb, project: rl, entity: team, group: grpo-7, name: vllm, run_id: abc-1, images: false, per_worker: true,
			config: {model: qwen3, lr: 1.0e-6, tp: 2, tags: [a, b], nested: {x: null}}}`,
			check: func(s Settings) bool {
				want := []item{{"model", `"qwen3"`}, {"lr", "0.000001"}, {"tp", "2"}, {"tags", `["a","b"]`}, {"nested", `{"x":null}`}}
				return s.Project == "rl" && s.Entity == "team" && s.Group == "grpo-7" && s.Name == "vllm" && s.RunID == "abc-1" &&
					!s.Images && s.PerWorker && fmt.Sprint(s.Config) == fmt.Sprint(want)
			}},
		{name: "typo", doc: "{type: wandb, projcet: rl}",
			errs: []string{"sinks[2].projcet (line 1): unknown setting of a wandb sink: the settings are type, project, entity, group, name, run_id, config, images, per_worker"}},
		{name: "bad values, all reported", doc: "type: wandb\nproject: a/b\nrun_id: \"x y\"\nimages: 1\nconfig: [1]\ngroup: {a: 1}\n",
			errs: []string{
				`sinks[2].project (line 2): "a/b" is not allowed: must be a W&B project name`,
				`sinks[2].run_id (line 3): "x y" is not allowed: must be a W&B run id`,
				`sinks[2].images (line 4): "1" is not allowed: must be true or false`,
				`sinks[2].config (line 5): a list is not allowed: must be a mapping`,
				`sinks[2].group (line 6): a mapping is not allowed: must be a string`,
			}},
		{name: "config not JSON", doc: "{type: wandb, config: {a: .inf, a: 1}}",
			errs: []string{`sinks[2].config.a (line 1): ".inf" is not allowed: must be representable in JSON`, `sinks[2].config.a (line 1): is given twice`}},
		{name: "typo and duplicate", doc: "type: wandb\nrunid: x\nproject: a\nproject: b\n",
			errs: []string{"sinks[2].runid (line 2): unknown setting of a wandb sink: the settings are type, project, entity, group, name, run_id, config, images, per_worker, keys, include, exclude; did you mean run_id?",
				"sinks[2].project (line 4): is given twice, at lines 3 and 4"}},
		{name: "empty project", doc: `{type: wandb, project: ""}`, errs: []string{`sinks[2].project (line 1): "" is not allowed`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeSettings(sinkspec.Parse(t, "sinks[2]", tt.doc))
			if len(tt.errs) == 0 {
				if err != nil || !tt.check(got) {
					t.Fatalf("got %+v, %v", got, err)
				}
				return
			}
			var ps config.Problems
			if !errors.As(err, &ps) || len(ps) != len(tt.errs) {
				t.Fatalf("error %v, want %d problems", err, len(tt.errs))
			}
			for i, want := range tt.errs {
				if !strings.HasPrefix(ps[i], want) {
					t.Errorf("problem %d = %q, want prefix %q", i, ps[i], want)
				}
			}
		})
	}
}

func TestJSONFloat(t *testing.T) {
	for _, tt := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "-0"}, {1, "1"}, {-1.5, "-1.5"}, {0.1, "0.1"}, {1e-6, "0.000001"},
		{1e-7, "1e-07"}, {123456789012, "123456789012"}, {1e21, "1e+21"}, {math.MaxFloat64, "1.7976931348623157e+308"},
		{math.NaN(), "NaN"}, {math.Inf(1), "Infinity"}, {math.Inf(-1), "-Infinity"},
	} {
		got := jsonFloat(tt.v)
		if got != tt.want {
			t.Errorf("jsonFloat(%v) = %s, want %s", tt.v, got, tt.want)
		}
		if f, err := strconv.ParseFloat(got, 64); !math.IsNaN(tt.v) && (err != nil || f != tt.v) && !math.IsInf(tt.v, 0) {
			t.Errorf("%s reads back as %v, %v", got, f, err)
		}
		if !math.IsNaN(tt.v) && !math.IsInf(tt.v, 0) && !json.Valid([]byte(got)) {
			t.Errorf("%s is not JSON", got)
		}
	}
}

// TestFraming walks what appendLogRecord writes, from offsets around block ends, by the rules
// of the format: chunks never cross a block, a tail under 7 bytes is zeros, every CRC-32 IEEE
// over type and payload holds, and FULL or FIRST MIDDLE* LAST chunks carry the payload.
func TestFraming(t *testing.T) {
	for _, start := range []int64{7, blockSize - 8, blockSize - 7, blockSize - 6, blockSize - 1, 3*blockSize + 100} {
		for _, n := range []int{0, 1, blockSize - 14, blockSize - 7, blockSize, 3*blockSize + 5} {
			payload := bytes.Repeat([]byte{0xab}, n)
			for i := range payload {
				payload[i] = byte(i * 7)
			}
			buf, end := appendLogRecord(nil, start, payload)
			if end != start+int64(len(buf)) {
				t.Fatalf("start %d, %d bytes: end %d, want %d", start, n, end, start+int64(len(buf)))
			}
			var got []byte
			var types []byte
			for off, i := start, 0; i < len(buf); {
				left := blockSize - int(off%blockSize)
				if left < chunkHeaderSize {
					if !bytes.Equal(buf[i:i+left], make([]byte, left)) {
						t.Fatalf("start %d, %d bytes: block tail at %d is not zeros", start, n, off)
					}
					i, off = i+left, off+int64(left)
					continue
				}
				crc := binary.LittleEndian.Uint32(buf[i:])
				length := int(binary.LittleEndian.Uint16(buf[i+4:]))
				if chunkHeaderSize+length > left {
					t.Fatalf("start %d, %d bytes: chunk at %d crosses a block", start, n, off)
				}
				if crc != crc32.ChecksumIEEE(buf[i+6:i+7+length]) {
					t.Fatalf("start %d, %d bytes: bad crc at %d", start, n, off)
				}
				types = append(types, buf[i+6])
				got = append(got, buf[i+7:i+7+length]...)
				i += chunkHeaderSize + length
				off += int64(chunkHeaderSize + length)
			}
			if !bytes.Equal(got, payload) {
				t.Errorf("start %d, %d bytes: payload differs", start, n)
			}
			ok := len(types) == 1 && types[0] == chunkFull ||
				len(types) > 1 && types[0] == chunkFirst && types[len(types)-1] == chunkLast &&
					strings.Trim(string(types[1:len(types)-1]), "\x03") == ""
			if !ok {
				t.Errorf("start %d, %d bytes: chunk types %v", start, n, types)
			}
		}
	}
}

func TestLayout(t *testing.T) {
	out := t.TempDir()
	w, err := open(out, sinkspec.Parse(t, "sinks[2]", "{type: wandb, run_id: r1}"), nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(out, "wandb", "offline-run-20250701_120000-r1")
	if w.RunDir() != dir || w.Path() != filepath.Join(dir, "run-r1.wandb") {
		t.Errorf("run dir %s, file %s", w.RunDir(), w.Path())
	}
	b, err := os.ReadFile(w.Path())
	if err != nil || !bytes.HasPrefix(b, []byte(":W&B\xe1\xbe\x00")) {
		t.Errorf("file starts %q, %v", b[:min(len(b), 7)], err)
	}
	// The same run id again in the same second must not overwrite the first run.
	if _, err := open(out, sinkspec.Parse(t, "sinks[2]", "{type: wandb, run_id: r1}"), nil, t0); err == nil || !strings.Contains(err.Error(), "run_id") {
		t.Errorf("second run with the same id: %v", err)
	}
}

func TestUnwritableDirectory(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := New(filepath.Join(blocker, "out"), sinkspec.Parse(t, "sinks[2]", "wandb"), nil)
	if err == nil {
		w.Close(context.Background())
		t.Fatal("no error")
	}
	if !strings.Contains(err.Error(), "create wandb run directory") || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("error %q does not say what failed", err)
	}
}

func testRecords(n int) []*step.Record {
	var rs []*step.Record
	for i := range n {
		s := t0.Add(time.Duration(i) * 30 * time.Second)
		rs = append(rs, &step.Record{Step: int64(i + 1), Start: s, End: s.Add(30 * time.Second),
			Metrics: map[string]float64{"vllm/a": float64(i) / 3, "vllm/b": 1e300}})
	}
	return rs
}

// failAt puts w's log, as written so far, under a file that fails its nth write from
// now on as a full disk does.
func failAt(t *testing.T, w *Writer, n int) {
	t.Helper()
	f, err := os.OpenFile(w.Path(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.f.Close()
	d := &testkit.FullDisk{File: f}
	d.FailWrite(n)
	if w.f, err = appendlog.New(d, w.Path()); err != nil {
		t.Fatal(err)
	}
}

// TestRetryAfterFailedWrite checks that a step whose write failed halfway, written again as the
// queue retries it, leaves exactly the log of a run without the failure: no half record and no
// gap in the record numbers.
func TestRetryAfterFailedWrite(t *testing.T) {
	rs := testRecords(3)
	ctx := context.Background()
	run := func(fail int) (string, error) {
		w, err := open(t.TempDir(), sinkspec.Parse(t, "sinks[2]", "{type: wandb, run_id: same}"), nil, t0)
		if err != nil {
			t.Fatal(err)
		}
		failAt(t, w, fail)
		var first error
		for _, r := range rs {
			if err := w.Write(ctx, r); err != nil {
				first = err
				if err := w.Write(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := w.Write(ctx, rs[0]); !errors.Is(err, errClosed) {
			t.Errorf("write after close: %v", err)
		}
		return w.Path(), first
	}
	clean, _ := run(0)
	for _, fail := range []int{1, 2, 3} { // the first step with the Run record, a later one, Close is 4
		failed, err := run(fail)
		if err == nil || !strings.Contains(err.Error(), "no space left") {
			t.Fatalf("fail at write %d: error %v", fail, err)
		}
		a, _ := os.ReadFile(clean)
		b, _ := os.ReadFile(failed)
		if !bytes.Equal(a, b) {
			t.Errorf("fail at write %d: log differs from a clean one (%d vs %d bytes)", fail, len(b), len(a))
		}
	}
}

func TestConcurrentWriteAndClose(t *testing.T) {
	w, err := open(t.TempDir(), sinkspec.Parse(t, "sinks[2]", "{type: wandb, run_id: conc}"), nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, r := range testRecords(8) {
		wg.Go(func() { _ = w.Write(context.Background(), r) })
	}
	wg.Go(func() { _ = w.Close(context.Background()) })
	wg.Wait()
	b, err := os.ReadFile(w.Path())
	if err != nil || !bytes.HasPrefix(b, logHeader) {
		t.Fatalf("log %q..., %v", b[:min(len(b), 7)], err)
	}
}

func TestCanceledContext(t *testing.T) {
	w, err := open(t.TempDir(), sinkspec.Parse(t, "sinks[2]", "{type: wandb, run_id: ctx}"), nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Write(ctx, testRecords(1)[0]); !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}
