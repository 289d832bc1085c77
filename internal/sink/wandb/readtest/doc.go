// Package readtest reads the W&B runs that package wandb writes with W&B's own reader: the
// LevelDB-log reader of github.com/wandb/wandb/core/pkg/leveldb, opened the way W&B's core
// opens a run's transaction log, and the generated wandb_internal protos of
// core/pkg/service_go_proto. It is a module of its own so that W&B's code stays out of
// vllmstat's module: only its tests import anything.
//
// Run its tests from this directory with
//
//	GONOSUMDB=github.com/wandb/wandb go test ./...
//
// (the pinned W&B version is not in the checksum database; go.sum here holds its hash).
package readtest
