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

// readLogRecords returns the records of a log (header included in b) up to the first chunk that
// is cut short, fails its checksum or breaks the chunk order: a log that a kill cut in the
// middle of a write reads as the records before the cut. It reads what appendLogRecord writes;
// W&B's own reader is the one the tests hold it to.
func readLogRecords(b []byte) [][]byte {
	if len(b) < len(logHeader) || string(b[:len(logHeader)]) != string(logHeader) {
		return nil
	}
	var out [][]byte
	var rec []byte
	inRecord := false
	for off := len(logHeader); off < len(b); {
		left := blockSize - off%blockSize
		if left < chunkHeaderSize {
			off += left // the zeros that fill a block's tail
			continue
		}
		if len(b)-off < chunkHeaderSize {
			break
		}
		h := b[off : off+chunkHeaderSize]
		n, typ := int(h[4])|int(h[5])<<8, h[6]
		if chunkHeaderSize+n > left || off+chunkHeaderSize+n > len(b) {
			break
		}
		payload := b[off+chunkHeaderSize : off+chunkHeaderSize+n]
		crc := uint32(h[0]) | uint32(h[1])<<8 | uint32(h[2])<<16 | uint32(h[3])<<24
		if crc != crc32.Update(crc32.ChecksumIEEE([]byte{typ}), crc32.IEEETable, payload) {
			break
		}
		off += chunkHeaderSize + n
		switch {
		case typ == chunkFull && !inRecord:
			out = append(out, payload)
		case typ == chunkFirst && !inRecord:
			rec, inRecord = append([]byte(nil), payload...), true
		case typ == chunkMiddle && inRecord:
			rec = append(rec, payload...)
		case typ == chunkLast && inRecord:
			out = append(out, append(rec, payload...))
			rec, inRecord = nil, false
		default:
			return out
		}
	}
	return out
}
