package tensorboard

import (
	"encoding/binary"
	"hash/crc32"
)

// castagnoli is the table of the CRC-32C checksums that TFRecord files carry.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is the checksum TFRecord stores: CRC-32C rotated right by 15 bits plus a constant.
// TensorFlow masks it because computing the CRC of bytes that themselves hold CRCs is
// otherwise error-prone (tensorflow/core/lib/hash/crc32c.h, Mask).
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// appendRecord appends data in TFRecord framing: the length as a little-endian uint64, the
// masked CRC of those 8 bytes, the data, and the masked CRC of the data
// (tensorflow/core/lib/io/record_writer.h).
func appendRecord(dst, data []byte) []byte {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	dst = append(dst, n[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, maskedCRC(n[:]))
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, maskedCRC(data))
}
