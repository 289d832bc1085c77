package remotewrite

import (
	"math"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/vllmstat/vllmstat/internal/promname"
)

// Field numbers of Prometheus' remote-write 1.0 messages (prompb/remote.proto and types.proto):
// WriteRequest{repeated TimeSeries timeseries = 1}, TimeSeries{repeated Label labels = 1;
// repeated Sample samples = 2}, Label{string name = 1; string value = 2},
// Sample{double value = 1; int64 timestamp = 2}.
const (
	fieldTimeseries  protowire.Number = 1
	fieldLabels      protowire.Number = 1
	fieldSamples     protowire.Number = 2
	fieldLabelName   protowire.Number = 1
	fieldLabelValue  protowire.Number = 2
	fieldSampleValue protowire.Number = 1
	fieldSampleTime  protowire.Number = 2
)

// series is one time series' identity, its labels already encoded as the TimeSeries' labels
// fields.
type series struct {
	labels []byte
	last   int64 // time of the series' latest interval sample, Unix ms
}

// sample is one value of a series at a time in Unix milliseconds.
type sample struct {
	s *series
	t int64
	v float64
}

// newSeries encodes name, labels and extra (sorted) as a series' labels: __name__ first, the
// rest sorted by name; labels with an empty value are left out, as Prometheus does.
func newSeries(name string, labels, extra []promname.Label) *series {
	ls := make([]promname.Label, 0, len(labels)+len(extra))
	for _, l := range labels {
		if l.Value != "" {
			ls = append(ls, l)
		}
	}
	ls = append(ls, extra...)
	sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
	b := appendLabel(nil, "__name__", name)
	for _, l := range ls {
		b = appendLabel(b, l.Name, l.Value)
	}
	return &series{labels: b}
}

func appendLabel(b []byte, name, value string) []byte {
	b = protowire.AppendTag(b, fieldLabels, protowire.BytesType)
	n := protowire.SizeTag(fieldLabelName) + protowire.SizeBytes(len(name)) +
		protowire.SizeTag(fieldLabelValue) + protowire.SizeBytes(len(value))
	b = protowire.AppendVarint(b, uint64(n))
	b = protowire.AppendTag(b, fieldLabelName, protowire.BytesType)
	b = protowire.AppendString(b, name)
	b = protowire.AppendTag(b, fieldLabelValue, protowire.BytesType)
	return protowire.AppendString(b, value)
}

// sampleSize is the size of one encoded Sample message's content.
func sampleSize(t int64) int {
	return protowire.SizeTag(fieldSampleValue) + protowire.SizeFixed64() +
		protowire.SizeTag(fieldSampleTime) + protowire.SizeVarint(uint64(t))
}

// encode appends a WriteRequest holding batch to dst. Samples of one series become one
// TimeSeries, in the order the series first appear, its samples in batch order.
func encode(dst []byte, batch []sample) []byte {
	var order []*series
	bySeries := map[*series][]int{}
	for i, s := range batch {
		if _, ok := bySeries[s.s]; !ok {
			order = append(order, s.s)
		}
		bySeries[s.s] = append(bySeries[s.s], i)
	}
	for _, sr := range order {
		idx := bySeries[sr]
		n := len(sr.labels)
		for _, i := range idx {
			m := sampleSize(batch[i].t)
			n += protowire.SizeTag(fieldSamples) + protowire.SizeBytes(m)
		}
		dst = protowire.AppendTag(dst, fieldTimeseries, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(n))
		dst = append(dst, sr.labels...)
		for _, i := range idx {
			s := batch[i]
			dst = protowire.AppendTag(dst, fieldSamples, protowire.BytesType)
			dst = protowire.AppendVarint(dst, uint64(sampleSize(s.t)))
			dst = protowire.AppendTag(dst, fieldSampleValue, protowire.Fixed64Type)
			dst = protowire.AppendFixed64(dst, math.Float64bits(s.v))
			dst = protowire.AppendTag(dst, fieldSampleTime, protowire.VarintType)
			dst = protowire.AppendVarint(dst, uint64(s.t))
		}
	}
	return dst
}
