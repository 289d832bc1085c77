package wandb

import (
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of wandb_internal.Record and the messages it holds, from W&B's
// wandb/proto/wandb_internal.proto (the same numbers as the generated descriptors of
// github.com/wandb/wandb/core/pkg/service_go_proto), and of google.protobuf.Timestamp. They
// are encoded by hand so that the binary carries no generated code for a handful of fields.
const (
	recordNum     = 1 // int64, the record's sequence number
	recordHistory = 2 // HistoryRecord
	recordSummary = 3 // SummaryRecord
	recordFiles   = 6 // FilesRecord
	recordRun     = 17
	recordExit    = 18 // RunExitRecord

	runRunID        = 1
	runEntity       = 2
	runProject      = 3
	runConfig       = 4 // ConfigRecord
	runGroup        = 6
	runDisplayName  = 8
	runHost         = 13
	runStartingStep = 14 // int64
	runStartTime    = 17 // google.protobuf.Timestamp
	runResumed      = 18 // bool
	runRuntime      = 20 // int32 seconds

	timestampSeconds = 1
	timestampNanos   = 2

	configUpdate  = 1 // repeated ConfigItem
	summaryUpdate = 1 // repeated SummaryItem
	historyItem   = 1 // repeated HistoryItem
	historyStep   = 2 // HistoryStep
	stepNum       = 1

	// ConfigItem, SummaryItem and HistoryItem share their fields.
	itemKey       = 1
	itemValueJSON = 16

	filesFiles    = 1 // repeated FilesItem
	filesItemPath = 1
	filesItemType = 3 // FileType; policy (2) stays at its zero value, NOW: upload at once

	fileTypeMedia = 2

	exitCode    = 1 // int32
	exitRuntime = 2 // int32 seconds
)

// item is a key and its value as JSON: a config, summary or history entry.
type item struct {
	key, json string
}

// runInfo is what the Run record says about the run.
type runInfo struct {
	id, entity, project, group, name, host string
	config                                 []item
	start                                  time.Time
	// resumed: this instance continues an earlier one of the run, from startingStep, after
	// runtime seconds of it; zero values are left out, as proto3 does.
	resumed      bool
	startingStep int64
	runtime      int32
}

func runRecord(num int64, r runInfo) []byte {
	var b []byte
	b = appendString(b, runRunID, r.id)
	b = appendString(b, runEntity, r.entity)
	b = appendString(b, runProject, r.project)
	if len(r.config) > 0 {
		b = appendMessage(b, runConfig, appendItems(nil, configUpdate, r.config))
	}
	b = appendString(b, runGroup, r.group)
	b = appendString(b, runDisplayName, r.name)
	b = appendString(b, runHost, r.host)
	b = appendVarint(b, runStartingStep, uint64(r.startingStep))
	var ts []byte
	ts = appendVarint(ts, timestampSeconds, uint64(r.start.Unix()))
	ts = appendVarint(ts, timestampNanos, uint64(r.start.Nanosecond()))
	b = appendMessage(b, runStartTime, ts)
	if r.resumed {
		b = appendVarint(b, runResumed, 1)
	}
	b = appendVarint(b, runRuntime, uint64(int64(r.runtime)))
	return record(num, recordRun, b)
}

func historyRecord(num, step int64, items []item) []byte {
	b := appendItems(nil, historyItem, items)
	b = appendMessage(b, historyStep, appendVarint(nil, stepNum, uint64(step)))
	return record(num, recordHistory, b)
}

func summaryRecord(num int64, items []item) []byte {
	return record(num, recordSummary, appendItems(nil, summaryUpdate, items))
}

func filesRecord(num int64, paths []string) []byte {
	var b []byte
	for _, p := range paths {
		f := appendString(nil, filesItemPath, p)
		f = appendVarint(f, filesItemType, fileTypeMedia)
		b = appendMessage(b, filesFiles, f)
	}
	return record(num, recordFiles, b)
}

func exitRecord(num int64, code, runtimeS int32) []byte {
	b := appendVarint(nil, exitCode, uint64(int64(code)))
	b = appendVarint(b, exitRuntime, uint64(int64(runtimeS)))
	return record(num, recordExit, b)
}

// record wraps one message of the Record oneof. The oneof field is written even when empty,
// since its presence is what says which record this is.
func record(num int64, field protowire.Number, msg []byte) []byte {
	b := appendVarint(nil, recordNum, uint64(num))
	return appendMessage(b, field, msg)
}

func appendItems(b []byte, field protowire.Number, items []item) []byte {
	var it []byte
	for _, i := range items {
		it = appendString(it[:0], itemKey, i.key)
		it = appendString(it, itemValueJSON, i.json)
		b = appendMessage(b, field, it)
	}
	return b
}

func appendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

// appendString writes a non-empty string; proto3 leaves empty ones out.
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendVarint writes a non-zero varint; proto3 leaves zeros out.
func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}
