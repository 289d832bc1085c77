package tensorboard

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/appendlog"
	"github.com/vllmstat/vllmstat/internal/sink"
)

// CutAfter takes the summary events of the steps after n out of the directory's event files.
// TensorBoard reads every file whose name holds "tfevents", so those of a file go to one named
// as it is with "tfrecords" instead, and .cut-<k> (appendlog.KeepCut):
// events.out.tfrecords.<rest>.cut-1. The file's other records (its version first), and a
// record a kill cut short at its end, stay.
func (s Settings) CutAfter(n int64) ([]sink.Cut, error) {
	names, err := filepath.Glob(filepath.Join(s.Dir, "events.out.tfevents.*"))
	if err != nil {
		return nil, fmt.Errorf("list event files: %w", err)
	}
	slices.Sort(names)
	var cuts []sink.Cut
	for _, path := range names {
		c, err := cutEvents(path, n)
		if err != nil {
			return cuts, fmt.Errorf("cut the steps after %d out of %q: %w", n, path, err)
		}
		if c.Records > 0 {
			cuts = append(cuts, c)
		}
	}
	return cuts, nil
}

// cutEvents cuts the summary events of the steps after n out of the event file at path.
func cutEvents(path string, n int64) (sink.Cut, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return sink.Cut{}, err
	}
	var kept, gone []byte
	records := 0
	off := 0
	for len(b)-off >= 16 {
		size := binary.LittleEndian.Uint64(b[off:])
		if binary.LittleEndian.Uint32(b[off+8:]) != maskedCRC(b[off:off+8]) || size > uint64(len(b)-off-16) {
			break // cut short, or not a record: kept as it is
		}
		end := off + 16 + int(size)
		if step, summary := summaryStep(b[off+12 : end-4]); summary && step > n {
			gone = append(gone, b[off:end]...)
			records++
		} else {
			kept = append(kept, b[off:end]...)
		}
		off = end
	}
	if records == 0 {
		return sink.Cut{}, nil
	}
	kept = append(kept, b[off:]...)
	dir, base := filepath.Split(path)
	side, err := appendlog.KeepCut(filepath.Join(dir, strings.Replace(base, "tfevents", "tfrecords", 1)), gone)
	if err != nil {
		return sink.Cut{}, err
	}
	if err := appendlog.ReplaceFile(path, kept); err != nil {
		return sink.Cut{}, err
	}
	return sink.Cut{File: path, Side: side, Records: records}, nil
}
