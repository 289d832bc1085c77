package readtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wandb/simplejsonext"
	"github.com/wandb/wandb/core/pkg/leveldb"
	spb "github.com/wandb/wandb/core/pkg/service_go_proto"
	"google.golang.org/protobuf/proto"

	"github.com/vllmstat/vllmstat/internal/sink/wandb"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
	"github.com/vllmstat/vllmstat/internal/testkit/sinkspec"
)

var t0 = time.Date(2025, 7, 1, 12, 0, 0, 250_000_000, time.UTC)

// header is how W&B's core checks a transaction log's first 7 bytes
// (internal/stream/store.go: ident, magic and version, little-endian).
type header struct {
	Ident   [4]byte
	Magic   uint16
	Version byte
}

// readRun reads a transaction log as W&B's core does (internal/stream/store.go, Store.Open
// with os.O_RDONLY, then Store.Read): leveldb.NewReaderExt with CRC-32 IEEE, ReadHeader, a
// header check, then Next and proto.Unmarshal until io.EOF. It returns every record read and
// the error that ended the reading, nil at a clean end.
func readRun(path string) ([]*spb.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := leveldb.NewReaderExt(f, leveldb.CRCAlgoIEEE)
	buf := make([]byte, 7)
	if err := r.ReadHeader(buf); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	var h header
	if err := binary.Read(bytes.NewReader(buf), binary.LittleEndian, &h); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	if h != (header{Ident: [4]byte{':', 'W', '&', 'B'}, Magic: 0xBEE1, Version: 0}) {
		return nil, fmt.Errorf("invalid header %+v", h)
	}
	var recs []*spb.Record
	for {
		rr, err := r.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		b, err := io.ReadAll(rr)
		if err != nil {
			return recs, err
		}
		rec := &spb.Record{}
		if err := proto.Unmarshal(b, rec); err != nil {
			return recs, err
		}
		recs = append(recs, rec)
	}
}

// records makes n steps with keys metric keys each; the values cover integers, fractions,
// tiny and huge magnitudes and the non-finite ones.
func records(n, keys int) []*step.Record {
	special := []float64{0, 1, -2.5, 1.0 / 3, 1e-9, 6.02214076e23, math.MaxFloat64, math.SmallestNonzeroFloat64,
		math.NaN(), math.Inf(1), math.Inf(-1), 123456789.125}
	var rs []*step.Record
	for i := range n {
		s := t0.Add(time.Duration(i) * 30 * time.Second)
		r := &step.Record{Step: int64(i), Start: s, End: s.Add(30*time.Second + time.Duration(i)*time.Millisecond),
			DurationS: 30, Workers: 2, Metrics: map[string]float64{}}
		for k := range keys {
			r.Metrics[fmt.Sprintf("vllm/key_%04d", k)] = special[(i+k)%len(special)] * float64(k+1)
		}
		r.Metrics["vllm/prefix_cache_hit_rate"] = float64(i%100) / 100
		r.PerWorker = []step.WorkerRecord{
			{Target: "http://10.0.0.7:8000/metrics", Engine: "0", Metrics: map[string]float64{"vllm/num_preemptions": float64(i)}},
			{Target: "http://10.0.0.8:8000/metrics", Metrics: map[string]float64{"vllm/num_preemptions": 0.5}},
		}
		rs = append(rs, r)
	}
	return rs
}

// writeRun writes rs through the sink and returns it and the log's size after each step.
func writeRun(t *testing.T, out, settings string, rs []*step.Record) (*wandb.Writer, []int64) {
	t.Helper()
	w, err := wandb.New(out, sinkspec.Parse(t, "sinks[0]", settings), nil)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, r := range rs {
		if err := w.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(w.Path())
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, fi.Size())
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w, sizes
}

// number parses a value_json with W&B's own JSON reader and returns it as a float64.
func number(t *testing.T, js string) float64 {
	t.Helper()
	v, err := simplejsonext.UnmarshalString(js)
	if err != nil {
		t.Fatalf("W&B cannot parse value_json %q: %v", js, err)
	}
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	}
	t.Fatalf("value_json %q is a %T, not a number", js, v)
	return 0
}

func same(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

// workerName is how the sinks name a worker: host:port of an http(s) target whose path is
// /metrics, and the engine label after a slash when there is one.
func workerName(t *testing.T, target, engine string) string {
	t.Helper()
	hp, ok := strings.CutPrefix(target, "http://")
	if !ok {
		t.Fatalf("target %q: the tests use http:// targets", target)
	}
	hp, ok = strings.CutSuffix(hp, "/metrics")
	if !ok || strings.Contains(hp, "/") {
		t.Fatalf("target %q: the tests use /metrics targets", target)
	}
	if engine != "" {
		return hp + "/" + engine
	}
	return hp
}

// checkHistory compares a History record with the step, exactly: every key written, none
// missing, and every value the same float64.
func checkHistory(t *testing.T, h *spb.HistoryRecord, r *step.Record, start time.Time, perWorker bool) map[string]string {
	t.Helper()
	if h.GetStep().GetNum() != r.Step {
		t.Errorf("step %d: history step.num = %d", r.Step, h.GetStep().GetNum())
	}
	want := map[string]float64{
		"_step":      float64(r.Step),
		"_runtime":   r.End.Sub(start).Seconds(),
		"_timestamp": float64(r.End.Unix()) + float64(r.End.Nanosecond())/1e9,
	}
	maps.Copy(want, r.Scalars("vllm"))
	if perWorker {
		for _, w := range r.PerWorker {
			for k, v := range w.Metrics {
				want[k+"/"+workerName(t, w.Target, w.Engine)] = v
			}
		}
	}
	other := map[string]string{}
	seen := map[string]bool{}
	for _, it := range h.GetItem() {
		if len(it.GetNestedKey()) > 0 {
			t.Errorf("step %d: nested key %q", r.Step, it.GetNestedKey())
		}
		if seen[it.GetKey()] {
			t.Errorf("step %d: key %s twice", r.Step, it.GetKey())
		}
		seen[it.GetKey()] = true
		w, ok := want[it.GetKey()]
		if !ok {
			other[it.GetKey()] = it.GetValueJson()
			continue
		}
		if got := number(t, it.GetValueJson()); !same(got, w) {
			t.Errorf("step %d: %s = %s, want %v", r.Step, it.GetKey(), it.GetValueJson(), w)
		}
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("step %d: key %s missing", r.Step, k)
		}
	}
	if strings.HasPrefix(h.GetItem()[0].GetKey(), "_") != true {
		t.Errorf("step %d: _step, _runtime and _timestamp do not come first", r.Step)
	}
	return other
}

// TestManySteps writes a long run with the W&B sink and reads it back with W&B's reader:
// the Run record first, one History record per step holding exactly the step's metrics,
// then the summary and a clean Exit record, numbered 1, 2, 3... as W&B numbers them.
func TestManySteps(t *testing.T) {
	out := t.TempDir()
	rs := records(1500, 40)
	w, _ := writeRun(t, out, `{type: wandb, project: rl-fleet, entity: team, group: grpo-qwen3, name: vllm, run_id: many1,
		per_worker: true, config: {model: qwen3-8b, lr: 1.0e-6, workers: [a, b]}}`, rs)
	if !strings.HasPrefix(filepath.Base(w.RunDir()), "offline-run-") || filepath.Base(w.Path()) != "run-many1.wandb" {
		t.Errorf("run dir %s, file %s", w.RunDir(), w.Path())
	}
	recs, err := readRun(w.Path())
	if err != nil {
		t.Fatalf("W&B reader: %v after %d records", err, len(recs))
	}
	if len(recs) != len(rs)+3 {
		t.Fatalf("%d records, want run + %d history + summary + exit", len(recs), len(rs))
	}
	for i, rec := range recs {
		if rec.GetNum() != int64(i+1) {
			t.Fatalf("record %d has num %d", i, rec.GetNum())
		}
	}
	run := recs[0].GetRun()
	if run == nil {
		t.Fatalf("first record is %T, want a Run record", recs[0].GetRecordType())
	}
	if run.GetProject() != "rl-fleet" || run.GetEntity() != "team" || run.GetRunGroup() != "grpo-qwen3" ||
		run.GetDisplayName() != "vllm" || run.GetRunId() != "many1" || !run.GetStartTime().AsTime().Equal(t0) {
		t.Errorf("run record %v", run)
	}
	var cfg []string
	for _, it := range run.GetConfig().GetUpdate() {
		cfg = append(cfg, it.GetKey()+"="+it.GetValueJson())
	}
	if want := []string{`model="qwen3-8b"`, `lr=0.000001`, `workers=["a","b"]`}; !slices.Equal(cfg, want) {
		t.Errorf("config %q, want %q", cfg, want)
	}
	for i, r := range rs {
		h := recs[i+1].GetHistory()
		if h == nil {
			t.Fatalf("record %d is %T, want History", i+1, recs[i+1].GetRecordType())
		}
		if other := checkHistory(t, h, r, t0, true); len(other) > 0 {
			t.Errorf("step %d: unexpected keys %v", r.Step, other)
		}
	}
	sum := recs[len(recs)-2].GetSummary()
	last := rs[len(rs)-1]
	if sum == nil || len(sum.GetUpdate()) != len(last.Metrics)+2+3 {
		t.Errorf("summary record %v", recs[len(recs)-2])
	}
	for _, it := range sum.GetUpdate() {
		if v, ok := last.Metrics[it.GetKey()]; ok && !same(number(t, it.GetValueJson()), v) {
			t.Errorf("summary %s = %s, want %v", it.GetKey(), it.GetValueJson(), v)
		}
	}
	exit := recs[len(recs)-1].GetExit()
	if exit == nil || exit.GetExitCode() != 0 || exit.GetRuntime() != int32(last.End.Sub(t0).Round(time.Second)/time.Second) {
		t.Errorf("last record %v, want Exit with code 0", recs[len(recs)-1])
	}
}

// TestLargeRecord writes a step whose History record spans several 32 KiB blocks, between
// small ones, so its chunks are FIRST, MIDDLE... LAST.
func TestLargeRecord(t *testing.T) {
	rs := records(5, 10)
	for k := range 6000 {
		rs[2].Metrics[fmt.Sprintf("vllm/large/%05d", k)] = float64(k) * 1.5
	}
	w, sizes := writeRun(t, t.TempDir(), "{type: wandb}", rs)
	if sizes[2]-sizes[1] < 3*32*1024 {
		t.Fatalf("large step is %d bytes, want more than 3 blocks", sizes[2]-sizes[1])
	}
	recs, err := readRun(w.Path())
	if err != nil || len(recs) != len(rs)+3 {
		t.Fatalf("W&B reader: %d records, %v", len(recs), err)
	}
	for i, r := range rs {
		checkHistory(t, recs[i+1].GetHistory(), r, t0, false)
	}
}

// TestCutOff cuts a finished log at many places, as a crash would, and checks that W&B's
// reader returns every whole record before the cut and nothing of the cut one. Each step
// after the first is one record, so the log's size after each step is a record boundary.
func TestCutOff(t *testing.T) {
	rs := records(40, 8)
	for k := range 3000 {
		rs[20].Metrics[fmt.Sprintf("vllm/large/%05d", k)] = float64(k)
	}
	w, sizes := writeRun(t, t.TempDir(), "{type: wandb}", rs)
	full, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	// bounds[i] is a record boundary with whole[i] records before it. The first step also
	// writes the Run record, which ends after its chunk header and payload in the first block.
	recs, err := readRun(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	bounds := []int64{7, 7 + 7 + int64(proto.Size(recs[0]))}
	whole := []int{0, 1}
	for i, s := range sizes {
		bounds = append(bounds, s)
		whole = append(whole, i+2)
	}
	expect := func(cut int64) int {
		n := 0
		for i, b := range bounds {
			if b <= cut {
				n = whole[i]
			}
		}
		return n
	}
	cuts := map[int64]bool{}
	for _, b := range bounds {
		for _, d := range []int64{-8, -7, -1, 0, 1, 6, 7, 8} {
			cuts[b+d] = true
		}
	}
	for c := bounds[1]; c < bounds[2]; c++ {
		cuts[c] = true
	}
	for c := bounds[21]; c < bounds[22]; c += 997 {
		cuts[c] = true
	}
	for blk := int64(32 * 1024); blk < int64(len(full)); blk += 32 * 1024 {
		for _, d := range []int64{-1, 0, 1, 7} {
			cuts[blk+d] = true
		}
	}
	dir := t.TempDir()
	for _, c := range slices.Sorted(maps.Keys(cuts)) {
		if c <= 7 || c > int64(len(full)) {
			continue
		}
		p := filepath.Join(dir, "cut.wandb")
		if err := os.WriteFile(p, full[:c], 0o644); err != nil {
			t.Fatal(err)
		}
		recs, err := readRun(p)
		if want := expect(c); len(recs) != want {
			t.Errorf("cut at %d: W&B reader returned %d records (%v), want %d", c, len(recs), err, expect(c))
		}
		for i, rec := range recs {
			if i >= 1 && i-1 < len(rs) {
				if h := rec.GetHistory(); h == nil || h.GetStep().GetNum() != rs[i-1].Step {
					t.Errorf("cut at %d: record %d is not step %d's history", c, i, rs[i-1].Step)
				}
			}
		}
		// A clean end is right only at a record's end, or after the zeros that fill a block's
		// tail behind it. W&B's reader has one exception: a file that ends inside the first
		// chunk header reads as empty without an error (ReadHeader does not mark the reader
		// started, so the short block counts as the end of the file).
		if c < 7+7 {
			continue
		}
		last := bounds[0]
		for _, b := range bounds {
			if b <= c {
				last = b
			}
		}
		if err == nil && !bytes.Equal(full[last:c], make([]byte, c-last)) {
			t.Errorf("cut at %d inside a record: the reader reports no error", c)
		}
	}
	// The cut that keeps only the header reads as a run without records.
	if recs, err := readRun(writeFile(t, dir, full[:7])); err != nil || len(recs) != 0 {
		t.Errorf("header only: %d records, %v", len(recs), err)
	}
}

func writeFile(t *testing.T, dir string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, "part.wandb")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImages writes plots and checks the Files record, the copied media files and the
// image-file values of the History record.
func TestImages(t *testing.T) {
	out := t.TempDir()
	var plots []string
	for i, size := range []image.Point{{64, 48}, {10, 300}} {
		img := image.NewNRGBA(image.Rect(0, 0, size.X, size.Y))
		for j := range img.Pix {
			img.Pix[j] = byte(j * (i + 3))
		}
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join("plots", "step_000003", fmt.Sprintf("timeline_%d.png", i))
		if err := os.MkdirAll(filepath.Join(out, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, p), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		plots = append(plots, p)
	}
	rs := records(4, 3)
	rs[3].Plots = append(plots, "plots/missing.png")
	w, _ := writeRun(t, out, "{type: wandb}", rs)
	recs, err := readRun(w.Path())
	if err != nil || len(recs) != len(rs)+4 {
		t.Fatalf("W&B reader: %d records, %v", len(recs), err)
	}
	files := recs[4].GetFiles()
	if files == nil || len(files.GetFiles()) != 2 {
		t.Fatalf("record 4 = %v, want a Files record of 2 files", recs[4])
	}
	images := checkHistory(t, recs[5].GetHistory(), rs[3], t0, false)
	if len(images) != 2 {
		t.Fatalf("history images %v, want 2", images)
	}
	for i, p := range plots {
		f := files.GetFiles()[i]
		if f.GetType() != spb.FilesItem_MEDIA || f.GetPolicy() != spb.FilesItem_NOW || !strings.HasPrefix(f.GetPath(), "media/images/") {
			t.Errorf("files item %v", f)
		}
		b, err := os.ReadFile(filepath.Join(out, p))
		if err != nil {
			t.Fatal(err)
		}
		copied, err := os.ReadFile(filepath.Join(w.RunDir(), "files", filepath.FromSlash(f.GetPath())))
		if err != nil || !bytes.Equal(copied, b) {
			t.Errorf("media file %s: %v, same bytes %v", f.GetPath(), err, bytes.Equal(copied, b))
		}
		js := images[fmt.Sprintf("plots/timeline_%d", i)]
		v, err := simplejsonext.UnmarshalString(js)
		m, ok := v.(map[string]any)
		if err != nil || !ok {
			t.Fatalf("image value %q: %v", js, err)
		}
		cfg, _ := png.DecodeConfig(bytes.NewReader(b))
		sum := sha256.Sum256(b)
		want := map[string]any{"_type": "image-file", "path": f.GetPath(), "sha256": hex.EncodeToString(sum[:]),
			"size": int64(len(b)), "width": int64(cfg.Width), "height": int64(cfg.Height), "format": "png"}
		if !maps.Equal(m, want) {
			t.Errorf("image value %v, want %v", m, want)
		}
		if !strings.Contains(f.GetPath(), fmt.Sprintf("timeline_%d_3_%s.png", i, hex.EncodeToString(sum[:])[:20])) {
			t.Errorf("media path %s is not named <key>_<step>_<sha256[:20]>.png", f.GetPath())
		}
	}
}

// TestEmptyRun closes a run without steps: it still has a Run and a clean Exit record.
func TestEmptyRun(t *testing.T) {
	w, _ := writeRun(t, t.TempDir(), "{type: wandb, project: p}", nil)
	recs, err := readRun(w.Path())
	if err != nil || len(recs) != 2 || recs[0].GetRun().GetProject() != "p" || recs[1].GetExit() == nil {
		t.Fatalf("records %v, %v", recs, err)
	}
}

func TestReaderRejectsDamage(t *testing.T) {
	w, _ := writeRun(t, t.TempDir(), "{type: wandb}", records(3, 3))
	full, _ := os.ReadFile(w.Path())
	dir := t.TempDir()
	bad := slices.Clone(full)
	bad[2] = 'X'
	if _, err := readRun(writeFile(t, dir, bad)); err == nil {
		t.Error("a damaged header reads without error")
	}
	bad = slices.Clone(full)
	bad[len(bad)-3] ^= 1
	if _, err := readRun(writeFile(t, dir, bad)); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("a flipped payload bit: %v, want a checksum error", err)
	}
}

// TestBlockTails makes a record end 1 to 7 bytes before a block's end, so that the next record
// starts after a zero-filled tail (1 to 6 bytes) or with an empty first chunk (7 bytes), and
// reads each run with W&B's reader. Keys of chosen lengths move the records' ends: a long one
// in step 0 brings step 1's end near a block's end, a growing one in step 1 moves it byte by
// byte (two bytes where a length needs one more varint byte).
func TestBlockTails(t *testing.T) {
	const block = 32 * 1024
	run := func(fill, pad int) (string, []*step.Record, int64) {
		rs := records(3, 2)
		rs[0].Metrics["vllm/fill_"+strings.Repeat("y", fill)] = 1
		rs[1].Metrics["vllm/pad_"+strings.Repeat("x", pad)] = 1
		w, sizes := writeRun(t, t.TempDir(), "{type: wandb, run_id: tails}", rs)
		return w.Path(), rs, block - sizes[1]%block
	}
	_, _, tail := run(0, 1)
	fill := int(tail) - 60 // step 1 then ends about 60 bytes before the first block's end
	found := map[int64]bool{}
	for pad := 1; len(found) < 7 && pad < 200; pad++ {
		path, rs, tail := run(fill, pad)
		if tail < 1 || tail > 7 || found[tail] {
			continue
		}
		found[tail] = true
		recs, err := readRun(path)
		if err != nil || len(recs) != len(rs)+3 {
			t.Fatalf("%d bytes left in the block: W&B reader returned %d records, %v", tail, len(recs), err)
		}
		for i, r := range rs {
			checkHistory(t, recs[i+1].GetHistory(), r, t0, false)
		}
	}
	if len(found) != 7 {
		t.Errorf("block tails exercised: %v, want 1 to 7", slices.Sorted(maps.Keys(found)))
	}
}

// TestStepsJSONL writes the records of a real run's steps.jsonl (vllmstat run against the
// simulated fleet: two servers of two engines, per-worker records on) and checks that W&B's
// reader decodes exactly them.
func TestStepsJSONL(t *testing.T) {
	b := testkit.ReadFixture(t, "steps.jsonl")
	var rs []*step.Record
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		r := &step.Record{}
		if err := json.Unmarshal(line, r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	w, _ := writeRun(t, t.TempDir(), "{type: wandb, per_worker: true}", rs)
	recs, err := readRun(w.Path())
	if err != nil || len(recs) != len(rs)+3 {
		t.Fatalf("W&B reader: %d records, %v", len(recs), err)
	}
	if !recs[0].GetRun().GetStartTime().AsTime().Equal(rs[0].Start) {
		t.Errorf("start time %v, want the first step's start %v", recs[0].GetRun().GetStartTime().AsTime(), rs[0].Start)
	}
	n := 0
	for i, r := range rs {
		h := recs[i+1].GetHistory()
		if other := checkHistory(t, h, r, rs[0].Start, true); len(other) > 0 {
			t.Errorf("step %d: unexpected keys %v", r.Step, other)
		}
		n += len(h.GetItem())
	}
	t.Logf("%d steps, %d history values compared", len(rs), n)
}
