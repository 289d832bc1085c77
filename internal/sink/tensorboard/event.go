package tensorboard

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the messages this package writes, from TensorFlow's
// tensorflow/core/util/event.proto (Event) and tensorflow/core/framework/summary.proto
// (Summary, Summary.Value, Summary.Image). They are encoded by hand so that the binary carries
// no generated code for a handful of fields.
const (
	eventWallTime    = 1 // double
	eventStep        = 2 // int64
	eventFileVersion = 3 // string, in oneof what
	eventSummary     = 5 // Summary, in oneof what

	summaryValue = 1 // repeated Summary.Value

	valueTag         = 1 // string
	valueSimpleValue = 2 // float, in oneof value
	valueImage       = 4 // Summary.Image, in oneof value

	imageHeight     = 1 // int32
	imageWidth      = 2 // int32
	imageColorspace = 3 // int32: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
	imageEncoded    = 4 // bytes
)

// fileVersion opens every event file; readers check its "brain.Event:" prefix.
const fileVersion = "brain.Event:2"

// scalar is one simple_value of a summary.
type scalar struct {
	tag   string
	value float64
}

// picture is one encoded image of a summary.
type picture struct {
	tag                       string
	png                       []byte
	width, height, colorspace int
}

// versionEvent encodes the Event that starts a file.
func versionEvent(wallTime float64) []byte {
	b := appendDouble(nil, eventWallTime, wallTime)
	b = protowire.AppendTag(b, eventFileVersion, protowire.BytesType)
	return protowire.AppendString(b, fileVersion)
}

// summaryEvent encodes the Event of one step: every scalar, then every picture.
func summaryEvent(wallTime float64, step int64, scalars []scalar, pictures []picture) []byte {
	var sum, val []byte
	for _, s := range scalars {
		val = protowire.AppendTag(val[:0], valueTag, protowire.BytesType)
		val = protowire.AppendString(val, s.tag)
		// simple_value is in a oneof, so it is written even when zero: without it the
		// value would have no kind at all.
		val = protowire.AppendTag(val, valueSimpleValue, protowire.Fixed32Type)
		val = protowire.AppendFixed32(val, math.Float32bits(float32(s.value)))
		sum = protowire.AppendTag(sum, summaryValue, protowire.BytesType)
		sum = protowire.AppendBytes(sum, val)
	}
	var img []byte
	for _, p := range pictures {
		img = appendInt(img[:0], imageHeight, p.height)
		img = appendInt(img, imageWidth, p.width)
		img = appendInt(img, imageColorspace, p.colorspace)
		img = protowire.AppendTag(img, imageEncoded, protowire.BytesType)
		img = protowire.AppendBytes(img, p.png)
		val = protowire.AppendTag(val[:0], valueTag, protowire.BytesType)
		val = protowire.AppendString(val, p.tag)
		val = protowire.AppendTag(val, valueImage, protowire.BytesType)
		val = protowire.AppendBytes(val, img)
		sum = protowire.AppendTag(sum, summaryValue, protowire.BytesType)
		sum = protowire.AppendBytes(sum, val)
	}
	b := appendDouble(nil, eventWallTime, wallTime)
	if step != 0 {
		b = protowire.AppendTag(b, eventStep, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(step))
	}
	b = protowire.AppendTag(b, eventSummary, protowire.BytesType)
	return protowire.AppendBytes(b, sum)
}

func appendDouble(b []byte, num protowire.Number, v float64) []byte {
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(v))
}

// appendInt writes a non-zero int32 field; proto3 leaves zero values out.
func appendInt(b []byte, num protowire.Number, v int) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(int64(v)))
}
