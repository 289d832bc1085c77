package wandb

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// A run that continues an out_dir's steps continues the W&B run written there before, as W&B
// continues an offline run given the same id: a new offline instance (a directory and log of
// its own) of the same run id. wandb sync uploads the instances of one run in the order of
// their Run records' start times, each one's history after the run's history so far (W&B's
// core, runsync and runupserter: the history line count the upsert returns is where the next
// instance's history starts). The new instance's Run record says what W&B's own Run record of a
// resumed run says (runbranch): resumed, its starting step, and the runtime so far, which its
// _runtime values go on from.

// previous is the latest offline instance that this sink wrote into an out_dir.
type previous struct {
	dir string
	id  string
	// runtime is how long the run had run, in seconds: the instance's largest _runtime, or, when
	// it logged no step, the runtime its Exit (or else its Run) record gives.
	runtime float64
}

// instancePrefix starts the name of an offline instance's directory:
// offline-run-<YYYYMMDD_HHMMSS>-<run id>.
const instancePrefix = "offline-run-"

const dirTime = "20060102_150405"

// instanceDir names an offline instance's directory.
func instanceDir(t time.Time, id string) string {
	return instancePrefix + t.Format(dirTime) + "-" + id
}

// parseInstanceDir takes an instance directory's name apart.
func parseInstanceDir(name string) (t time.Time, id string, ok bool) {
	rest, ok := strings.CutPrefix(name, instancePrefix)
	if !ok || len(rest) < len(dirTime)+2 || rest[len(dirTime)] != '-' {
		return time.Time{}, "", false
	}
	t, err := time.Parse(dirTime, rest[:len(dirTime)])
	return t, rest[len(dirTime)+1:], err == nil
}

// findPrevious returns the latest offline instance in dir (OUT_DIR/wandb) that this sink wrote,
// of run id when id is not "", or nil when there is none. An instance is this sink's when its
// log starts with a Run record: W&B's SDK starts its logs with a Header record, and a trainer's
// offline run in the same directory must not be taken for vllmstat's. A log cut short by a kill
// is read up to its last whole record.
func findPrevious(dir, id string) (*previous, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look for the run to continue: %w", err)
	}
	type candidate struct {
		t        time.Time
		name, id string
	}
	var cs []candidate
	for _, e := range entries {
		t, eid, ok := parseInstanceDir(e.Name())
		if ok && e.IsDir() && (id == "" || eid == id) {
			cs = append(cs, candidate{t, e.Name(), eid})
		}
	}
	slices.SortFunc(cs, func(a, b candidate) int { return cmp.Or(b.t.Compare(a.t), strings.Compare(b.name, a.name)) })
	for _, c := range cs {
		path := filepath.Join(dir, c.name, "run-"+c.id+".wandb")
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the run to continue: %w", err)
		}
		runtime, ours := readInstance(b)
		if ours {
			return &previous{dir: filepath.Join(dir, c.name), id: c.id, runtime: runtime}, nil
		}
	}
	return nil, nil
}

// readInstance reads what a log says of the run's runtime, and whether this sink wrote it.
func readInstance(log []byte) (runtime float64, ours bool) {
	var last, exit, run float64
	hasLast := false
	for i, rec := range readLogRecords(log) {
		field, msg, ok := recordMessage(rec)
		if !ok {
			break
		}
		if i == 0 && field != recordRun {
			return 0, false
		}
		switch field {
		case recordRun:
			run = float64(varintField(msg, runRuntime))
		case recordExit:
			exit = float64(varintField(msg, exitRuntime))
		case recordHistory, recordSummary:
			if v, ok := runtimeItem(msg); ok {
				last, hasLast = max(last, v), true
			}
		}
	}
	if hasLast {
		return last, true
	}
	return max(exit, run), true
}

// recordMessage returns the field and message of a Record's oneof.
func recordMessage(rec []byte) (protowire.Number, []byte, bool) {
	var field protowire.Number
	var msg []byte
	ok := eachField(rec, func(num protowire.Number, typ protowire.Type, _ uint64, b []byte) {
		if num != recordNum && typ == protowire.BytesType {
			field, msg = num, b
		}
	})
	return field, msg, ok && field != 0
}

// runtimeItem is the finite _runtime among a History's or Summary's items, if any; both keep
// their items in field 1.
func runtimeItem(msg []byte) (float64, bool) {
	var v float64
	found := false
	eachField(msg, func(num protowire.Number, typ protowire.Type, _ uint64, item []byte) {
		if num != historyItem || typ != protowire.BytesType {
			return
		}
		var key, js string
		eachField(item, func(num protowire.Number, typ protowire.Type, _ uint64, b []byte) {
			switch {
			case num == itemKey && typ == protowire.BytesType:
				key = string(b)
			case num == itemValueJSON && typ == protowire.BytesType:
				js = string(b)
			}
		})
		if key != "_runtime" {
			return
		}
		if f, err := strconv.ParseFloat(js, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			v, found = f, true
		}
	})
	return v, found
}

// varintField is a message's varint field num, 0 when absent.
func varintField(msg []byte, num protowire.Number) uint64 {
	var v uint64
	eachField(msg, func(n protowire.Number, typ protowire.Type, x uint64, _ []byte) {
		if n == num && typ == protowire.VarintType {
			v = x
		}
	})
	return v
}

// eachField calls f for each field of a message, x holding varint and fixed values and b bytes;
// it reports whether the message parsed whole.
func eachField(msg []byte, f func(num protowire.Number, typ protowire.Type, x uint64, b []byte)) bool {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return false
		}
		msg = msg[n:]
		var x uint64
		var b []byte
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(msg)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(msg)
			x = uint64(v)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(msg)
		case protowire.BytesType:
			b, n = protowire.ConsumeBytes(msg)
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return false
		}
		msg = msg[n:]
		f(num, typ, x, b)
	}
	return true
}
