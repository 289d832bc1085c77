package tensorboard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/vllmstat/vllmstat/internal/sink"
)

// LastStep is the step of the last summary event in the directory's event files, read in the
// order TensorBoard reads them, by name: that of the last file that holds one. Only the start of
// each record is read (an event's step comes before its summary), so files of images cost about
// their number of records. A record cut short by a kill ends a file.
func (s Settings) LastStep() (sink.Held, bool, error) {
	names, err := filepath.Glob(filepath.Join(s.Dir, "events.out.tfevents.*"))
	if err != nil {
		return sink.Held{}, false, fmt.Errorf("list event files: %w", err)
	}
	slices.Sort(names)
	for i := len(names) - 1; i >= 0; i-- {
		n, ok, err := lastSummaryStep(names[i])
		if err != nil {
			return sink.Held{}, false, fmt.Errorf("read the steps of %q: %w", names[i], err)
		}
		if ok {
			return sink.Held{Step: n, File: names[i]}, true, nil
		}
	}
	return sink.Held{}, false, nil
}

// lastSummaryStep is the step of the last summary event of the event file at path.
func lastSummaryStep(path string) (step int64, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, false, err
	}
	size := st.Size()
	var head [12]byte
	start := make([]byte, 32)
	for off := int64(0); size-off >= 16; {
		if _, err := f.ReadAt(head[:], off); err != nil {
			return 0, false, err
		}
		n := binary.LittleEndian.Uint64(head[:8])
		if binary.LittleEndian.Uint32(head[8:]) != maskedCRC(head[:8]) || n > uint64(size-off-16) {
			break // cut short, or not a record
		}
		b := start[:min(n, uint64(len(start)))]
		if _, err := f.ReadAt(b, off+12); err != nil && !errors.Is(err, io.EOF) {
			return 0, false, err
		}
		if s, summary := summaryStep(b); summary {
			step, ok = s, true
		}
		off += 16 + int64(n)
	}
	return step, ok, nil
}

// summaryStep reads the start of an encoded Event: its step (0 when left out) and whether it is
// a summary, whose field follows the step.
func summaryStep(b []byte) (step int64, summary bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		if num == eventSummary {
			return step, true
		}
		b = b[n:]
		if num == eventStep && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, false
			}
			step, b = int64(v), b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, false
		}
		b = b[n:]
	}
	return 0, false
}
