package wandb

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit/sinkspec"
)

// The W&B reader's view of resumed runs is tested in readtest/resume_test.go; these tests cover
// finding the run to continue, and the runtime that a resumed instance logs, read from its
// bytes here so that this module's tests check it too.

// writeInstance writes rs as one run into out at now, resuming or not, and returns the writer.
func writeInstance(t *testing.T, out, settings string, resume bool, now time.Time, rs []*step.Record) *Writer {
	t.Helper()
	set, err := decodeSettings(sinkspec.Parse(t, "sinks[2]", settings))
	if err != nil {
		t.Fatal(err)
	}
	w, err := openSettings(sink.Env{OutDir: out, MetricPrefix: "vllm", Resume: resume}, set, now)
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
	return w
}

// TestReadLogRecords reads logs that the writer wrote, whole and cut anywhere: a cut log reads
// as the records before the cut.
func TestReadLogRecords(t *testing.T) {
	rs := testRecords(6)
	for k := range 5000 { // a record over several blocks
		rs[3].Metrics["vllm/large/"+string(rune('a'+k%26))+time.Duration(k).String()] = float64(k)
	}
	w := writeInstance(t, t.TempDir(), "{type: wandb, run_id: logs}", false, t0, rs)
	full, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	recs := readLogRecords(full)
	if len(recs) != len(rs)+3 {
		t.Fatalf("%d records, want run, %d history, summary, exit", len(recs), len(rs))
	}
	for i, rec := range recs {
		if num := varintField(rec, recordNum); num != uint64(i+1) {
			t.Errorf("record %d has num %d", i, num)
		}
	}
	for c := 0; c <= len(full); c += 97 {
		got := readLogRecords(full[:c])
		if len(got) > len(recs) {
			t.Fatalf("cut at %d: %d records", c, len(got))
		}
		for i := range got {
			if !bytes.Equal(got[i], recs[i]) {
				t.Fatalf("cut at %d: record %d differs", c, i)
			}
		}
	}
	bad := bytes.Clone(full)
	bad[len(bad)-3] ^= 1
	if got := readLogRecords(bad); len(got) != len(recs)-1 {
		t.Errorf("a flipped bit in the last record: %d records, want %d", len(got), len(recs)-1)
	}
}

// TestFindPrevious picks the latest instance that this sink wrote, of the given id if any,
// passing over a trainer's W&B run in the same directory.
func TestFindPrevious(t *testing.T) {
	out := t.TempDir()
	dir := filepath.Join(out, "wandb")
	if p, err := findPrevious(dir, ""); p != nil || err != nil {
		t.Fatalf("no wandb directory: %v, %v", p, err)
	}
	rs := testRecords(4)
	a := writeInstance(t, out, "{type: wandb, run_id: aaa}", false, t0, rs[:2])
	b := writeInstance(t, out, "{type: wandb, run_id: bbb}", false, t0.Add(time.Minute), rs[2:3])
	writeInstance(t, out, "{type: wandb, run_id: ccc}", false, t0.Add(-time.Minute), rs[3:])
	// A trainer's offline run, later than all: W&B's SDK starts its log with a Header record.
	sdk := filepath.Join(dir, instanceDir(t0.Add(time.Hour), "sdk1"))
	if err := os.MkdirAll(sdk, 0o755); err != nil {
		t.Fatal(err)
	}
	header, _ := appendLogRecord(nil, int64(len(logHeader)), record(1, 21, nil)) // Record.header
	if err := os.WriteFile(filepath.Join(sdk, "run-sdk1.wandb"), append(bytes.Clone(logHeader), header...), 0o644); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "offline-run-garbage"), 0o755)
	os.MkdirAll(filepath.Join(dir, instanceDir(t0.Add(2*time.Hour), "nolog")), 0o755)

	for _, tt := range []struct {
		id, want string
		runtime  float64
	}{
		{"", b.RunDir(), 30},
		{"aaa", a.RunDir(), 60},
		{"sdk1", "", 0},
		{"zzz", "", 0},
	} {
		p, err := findPrevious(dir, tt.id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case tt.want == "" && p != nil:
			t.Errorf("id %q: found %+v, want none", tt.id, p)
		case tt.want != "" && (p == nil || p.dir != tt.want || p.runtime != tt.runtime):
			t.Errorf("id %q: found %+v, want %s after %v s", tt.id, p, tt.want, tt.runtime)
		}
	}
}

// TestResumeSameSecond continues a run in the second it was started in: the new instance
// takes the next second's directory name rather than fail or write into the first's.
func TestResumeSameSecond(t *testing.T) {
	out := t.TempDir()
	rs := testRecords(3)
	a := writeInstance(t, out, "{type: wandb}", false, t0, rs[:1])
	b := writeInstance(t, out, "{type: wandb}", true, t0, rs[1:2])
	c := writeInstance(t, out, "{type: wandb}", true, t0, rs[2:])
	if b.set.RunID != a.set.RunID || c.set.RunID != a.set.RunID {
		t.Fatalf("run ids %s, %s, %s; want one", a.set.RunID, b.set.RunID, c.set.RunID)
	}
	want := []string{instanceDir(t0, a.set.RunID), instanceDir(t0.Add(time.Second), a.set.RunID), instanceDir(t0.Add(2*time.Second), a.set.RunID)}
	for i, w := range []*Writer{a, b, c} {
		if filepath.Base(w.RunDir()) != want[i] {
			t.Errorf("instance %d in %s, want %s", i, filepath.Base(w.RunDir()), want[i])
		}
	}
	// Without resume, the same id in the same second is still refused.
	if _, err := open(out, sinkspec.Parse(t, "sinks[2]", "{type: wandb, run_id: "+a.set.RunID+"}"), nil, t0); err == nil {
		t.Error("a new run of a used id in the same second: no error")
	}
}

func TestParseInstanceDir(t *testing.T) {
	for _, tt := range []struct {
		name, id string
		ok       bool
	}{
		{"offline-run-20250701_120000-abc", "abc", true},
		{"offline-run-20250701_120000-a-b-c", "a-b-c", true},
		{"offline-run-20250701_120000-", "", false},
		{"offline-run-2025_120000-abc", "", false},
		{"run-20250701_120000-abc", "", false},
	} {
		ts, id, ok := parseInstanceDir(tt.name)
		if ok != tt.ok || ok && (id != tt.id || !ts.Equal(time.Date(2025, 7, 1, 12, 0, 0, 0, time.UTC))) {
			t.Errorf("%s: %v %q %v, want %q %v", tt.name, ts, id, ok, tt.id, tt.ok)
		}
	}
}

// testLogRecords splits a transaction log into its records by the format's rules, apart from
// the package's reader: the header, then 32 KiB blocks of chunks (CRC-32 IEEE over type and
// payload, length, type), a block's tail under 7 bytes skipped, FULL or FIRST MIDDLE* LAST.
func testLogRecords(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte(":W&B\xe1\xbe\x00")) {
		t.Fatalf("%s: no W&B header", path)
	}
	var recs [][]byte
	var rec []byte
	for off := 7; off < len(b); {
		if left := 32*1024 - off%(32*1024); left < 7 {
			off += left
			continue
		}
		n, typ := int(binary.LittleEndian.Uint16(b[off+4:])), b[off+6]
		payload := b[off+7 : off+7+n]
		if crc32.ChecksumIEEE(b[off+6:off+7+n]) != binary.LittleEndian.Uint32(b[off:]) {
			t.Fatalf("%s: bad checksum at %d", path, off)
		}
		off += 7 + n
		rec = append(rec, payload...)
		if typ == 1 || typ == 4 { // FULL, LAST
			recs, rec = append(recs, rec), nil
		}
	}
	return recs
}

// field returns the last value of a message's field num: bytes, or a varint as x.
func field(t *testing.T, msg []byte, num protowire.Number) (b []byte, x uint64, ok bool) {
	t.Helper()
	for len(msg) > 0 {
		n, typ, k := protowire.ConsumeTag(msg)
		if k < 0 {
			t.Fatal("bad message")
		}
		msg = msg[k:]
		k = protowire.ConsumeFieldValue(n, typ, msg)
		if k < 0 {
			t.Fatal("bad message")
		}
		if n == num {
			switch typ {
			case protowire.BytesType:
				b, _ = protowire.ConsumeBytes(msg)
			case protowire.VarintType:
				x, _ = protowire.ConsumeVarint(msg)
			}
			ok = true
		}
		msg = msg[k:]
	}
	return b, x, ok
}

// runtimes reads an instance's log: the _runtime of each History record (wandb_internal:
// Record.history 2, HistoryRecord.item 1, HistoryItem.key 1 and value_json 16), and the
// runtime in seconds of its Run record (Record.run 17, RunRecord.runtime 20).
func runtimes(t *testing.T, path string) (history []float64, run int64) {
	t.Helper()
	for _, rec := range testLogRecords(t, path) {
		if r, _, ok := field(t, rec, 17); ok {
			_, x, _ := field(t, r, 20)
			run = int64(x)
		}
		h, _, ok := field(t, rec, 2)
		for ok && len(h) > 0 {
			n, typ, k := protowire.ConsumeTag(h)
			h = h[k:]
			k = protowire.ConsumeFieldValue(n, typ, h)
			if n == 1 {
				it, _ := protowire.ConsumeBytes(h)
				if key, _, _ := field(t, it, 1); string(key) == "_runtime" {
					v, _, _ := field(t, it, 16)
					f, err := strconv.ParseFloat(string(v), 64)
					if err != nil {
						t.Fatalf("_runtime %q: %v", v, err)
					}
					history = append(history, f)
				}
			}
			h = h[k:]
		}
	}
	return history, run
}

// TestResumedRuntime: each instance of a resumed W&B run logs _runtime on from the runtime of
// the instances before it (the last _runtime of the one it continues), not from 0, and its Run
// record says that runtime; the time between the runs (a restart) is not counted. The log is
// read here from its bytes.
func TestResumedRuntime(t *testing.T) {
	out := t.TempDir()
	rs := testRecords(7) // 30 s apart, 30 s each
	for _, r := range rs[3:] {
		r.Start, r.End = r.Start.Add(10*time.Minute), r.End.Add(10*time.Minute) // a restart
	}
	for _, r := range rs[5:] {
		r.Start, r.End = r.Start.Add(time.Hour), r.End.Add(time.Hour)
	}
	var paths []string
	for _, part := range []struct {
		rs     []*step.Record
		resume bool
	}{{rs[:3], false}, {rs[3:5], true}, {rs[5:], true}} {
		w := writeInstance(t, out, "{type: wandb, project: rl}", part.resume, part.rs[0].Start, part.rs)
		paths = append(paths, w.Path())
	}
	if filepath.Dir(paths[1]) == filepath.Dir(paths[0]) || filepath.Base(paths[1]) != filepath.Base(paths[0]) || filepath.Base(paths[2]) != filepath.Base(paths[0]) {
		t.Fatalf("instances %v, want three directories of one run", paths)
	}
	// Instance 1 ran 90 s (three steps of 30 s), instance 2 60 s: the third goes on from 150 s.
	for i, want := range []struct {
		history []float64
		run     int64
	}{{[]float64{30, 60, 90}, 0}, {[]float64{120, 150}, 90}, {[]float64{180, 210}, 150}} {
		history, run := runtimes(t, paths[i])
		if !slices.Equal(history, want.history) || run != want.run {
			t.Errorf("instance %d: _runtime %v, Run record runtime %d; want %v and %d", i+1, history, run, want.history, want.run)
		}
	}
}
