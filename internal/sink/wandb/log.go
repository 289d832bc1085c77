package wandb

import (
	"hash/crc32"
)

// The transaction log of a W&B run (run-<id>.wandb) is a 7-byte header followed by the
// LevelDB log format: 32 KiB blocks of chunks, each with a 7-byte header (checksum uint32 LE,
// length uint16 LE, type byte) and its payload; a record too long for the rest of a block is
// split into FIRST, MIDDLE... and LAST chunks. The header counts as part of the first block.
// W&B's core (internal/stream/store.go, pkg/leveldb) opens the log with plain CRC-32 IEEE over
// the type byte and the payload, without LevelDB's masking.
const (
	blockSize       = 32 * 1024
	chunkHeaderSize = 7

	chunkFull   = 1
	chunkFirst  = 2
	chunkMiddle = 3
	chunkLast   = 4
)

// logHeader opens every log: ident ":W&B", magic 0xBEE1 as a little-endian uint16, version 0.
var logHeader = []byte{':', 'W', '&', 'B', 0xE1, 0xBE, 0}

// appendLogRecord appends payload as one record of the log whose next byte is at file offset
// off, and returns the buffer and the offset after it. A block's tail shorter than a chunk
// header is filled with zeros, as readers skip it.
func appendLogRecord(dst []byte, off int64, payload []byte) ([]byte, int64) {
	first := true
	for {
		left := blockSize - int(off%blockSize)
		if left < chunkHeaderSize {
			dst = append(dst, make([]byte, left)...)
			off += int64(left)
			left = blockSize
		}
		n := min(len(payload), left-chunkHeaderSize)
		last := n == len(payload)
		typ := byte(chunkMiddle)
		switch {
		case first && last:
			typ = chunkFull
		case first:
			typ = chunkFirst
		case last:
			typ = chunkLast
		}
		crc := crc32.Update(crc32.ChecksumIEEE([]byte{typ}), crc32.IEEETable, payload[:n])
		dst = append(dst, byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24), byte(n), byte(n>>8), typ)
		dst = append(dst, payload[:n]...)
		off += int64(chunkHeaderSize + n)
		payload = payload[n:]
		if last {
			return dst, off
		}
		first = false
	}
}
