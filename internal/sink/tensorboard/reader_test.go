package tensorboard

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// This file is a reader of event files written apart from the writer, for the tests only: it
// checks the framing of TensorFlow's own files (testdata/events.out.tfevents.*), which proves
// that the writer's framing, checked by it below, is TensorFlow's.

// readRecords splits a TFRecord file into its records, checking both CRCs of each.
func readRecords(b []byte) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(b); {
		if len(b)-off < 12 {
			return out, fmt.Errorf("offset %d: %d bytes left, want a 12-byte header", off, len(b)-off)
		}
		n := binary.LittleEndian.Uint64(b[off:])
		if got, want := binary.LittleEndian.Uint32(b[off+8:]), testMask(b[off:off+8]); got != want {
			return out, fmt.Errorf("offset %d: length crc %#x, want %#x", off, got, want)
		}
		start := off + 12
		if n > uint64(len(b)-start-4) || len(b)-start < 4 {
			return out, fmt.Errorf("offset %d: record of %d bytes runs past the end", off, n)
		}
		end := start + int(n)
		if got, want := binary.LittleEndian.Uint32(b[end:]), testMask(b[start:end]); got != want {
			return out, fmt.Errorf("offset %d: data crc %#x, want %#x", off, got, want)
		}
		out = append(out, b[start:end])
		off = end + 4
	}
	return out, nil
}

// testMask computes the masked CRC-32C bit by bit, independently of hash/crc32's tables.
func testMask(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82f63b78 // Castagnoli, reversed
			} else {
				crc >>= 1
			}
		}
	}
	crc = ^crc
	return (crc>>15 | crc<<17) + 0xa282ead8
}

type event struct {
	WallTime    float64
	Step        int64
	FileVersion string
	Values      []value
}

type value struct {
	Tag    string
	Simple *float32
	Image  *tbImage
	Plugin string
}

type tbImage struct {
	Height, Width, Colorspace int
	PNG                       []byte
}

// decodeEvent decodes the Event fields the writer uses and fails on any other field.
func decodeEvent(b []byte) (event, error) {
	var ev event
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
		switch {
		case num == 1 && typ == protowire.Fixed64Type:
			ev.WallTime = math.Float64frombits(v)
		case num == 2 && typ == protowire.VarintType:
			ev.Step = int64(v)
		case num == 3 && typ == protowire.BytesType:
			ev.FileVersion = string(bs)
		case num == 5 && typ == protowire.BytesType:
			return fields(bs, func(num protowire.Number, typ protowire.Type, _ uint64, bs []byte) error {
				if num != 1 || typ != protowire.BytesType {
					return fmt.Errorf("summary: unexpected field %d", num)
				}
				val, err := decodeValue(bs)
				ev.Values = append(ev.Values, val)
				return err
			})
		default:
			return fmt.Errorf("event: unexpected field %d type %d", num, typ)
		}
		return nil
	})
	return ev, err
}

func decodeValue(b []byte) (value, error) {
	var val value
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			val.Tag = string(bs)
		case num == 2 && typ == protowire.Fixed32Type:
			f := math.Float32frombits(uint32(v))
			val.Simple = &f
		case num == 4 && typ == protowire.BytesType:
			val.Image = &tbImage{}
			return fields(bs, func(num protowire.Number, typ protowire.Type, v uint64, bs []byte) error {
				switch {
				case num == 1 && typ == protowire.VarintType:
					val.Image.Height = int(v)
				case num == 2 && typ == protowire.VarintType:
					val.Image.Width = int(v)
				case num == 3 && typ == protowire.VarintType:
					val.Image.Colorspace = int(v)
				case num == 4 && typ == protowire.BytesType:
					val.Image.PNG = bs
				default:
					return fmt.Errorf("image: unexpected field %d", num)
				}
				return nil
			})
		case num == 9 && typ == protowire.BytesType: // SummaryMetadata{plugin_data{plugin_name}}
			return fields(bs, func(num protowire.Number, _ protowire.Type, _ uint64, bs []byte) error {
				if num != 1 {
					return nil
				}
				return fields(bs, func(num protowire.Number, _ protowire.Type, _ uint64, bs []byte) error {
					if num == 1 {
						val.Plugin = string(bs)
					}
					return nil
				})
			})
		default:
			return fmt.Errorf("value: unexpected field %d type %d", num, typ)
		}
		return nil
	})
	return val, err
}

// fields calls f for each field of a message: v holds varint and fixed values, bs bytes.
func fields(b []byte, f func(protowire.Number, protowire.Type, uint64, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v uint64
		var bs []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(b)
			v = uint64(x)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			bs, n = protowire.ConsumeBytes(b)
		default:
			return fmt.Errorf("unexpected wire type %d", typ)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, v, bs); err != nil {
			return err
		}
	}
	return nil
}

func readEvents(t *testing.T, path string) []event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := readRecords(b)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	evs := make([]event, len(recs))
	for i, r := range recs {
		if evs[i], err = decodeEvent(r); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	return evs
}

// TestReadTensorFlowFile reads a file that TensorFlow wrote: a file-version event and one
// scalar "hello" = 1 with the scalars plugin.
func TestReadTensorFlowFile(t *testing.T) {
	evs := readEvents(t, "testdata/events.out.tfevents.1687811641.v2")
	if len(evs) != 2 {
		t.Fatalf("got %d events, want 2", len(evs))
	}
	if evs[0].FileVersion != "brain.Event:2" || evs[0].WallTime != 1687811641 {
		t.Errorf("first event = %+v, want brain.Event:2 at 1687811641", evs[0])
	}
	v := evs[1].Values
	if len(v) != 1 || v[0].Tag != "hello" || v[0].Simple == nil || *v[0].Simple != 1 || v[0].Plugin != "scalars" {
		t.Errorf("second event values = %+v, want hello = 1 (scalars)", v)
	}
	// Both CRCs are checked: any flipped bit must be caught.
	b, _ := os.ReadFile("testdata/events.out.tfevents.1687811641.v2")
	for _, off := range []int{0, 9, 20, len(b) - 1} {
		c := append([]byte(nil), b...)
		c[off] ^= 0x10
		if _, err := readRecords(c); err == nil {
			t.Errorf("flipped bit at offset %d: no error", off)
		}
	}
}

// TestMaskMatchesWriter checks the writer's table-driven CRC against the bitwise one here.
func TestMaskMatchesWriter(t *testing.T) {
	for _, s := range []string{"", "a", "123456789", "brain.Event:2"} {
		if got, want := maskedCRC([]byte(s)), testMask([]byte(s)); got != want {
			t.Errorf("maskedCRC(%q) = %#x, want %#x", s, got, want)
		}
	}
}
