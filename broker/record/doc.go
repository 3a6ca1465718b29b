// Package record owns the Kafka record batch format, magic v2 only: header
// decoding, validation of batches as producers send them, in-place stamping
// of broker-assigned fields, and decoding/encoding of records for tests and
// tools.
//
// A batch on the wire and on disk is
//
//	baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 |
//	magic int8 (=2) | crc uint32 | attributes int16 | lastOffsetDelta int32 |
//	baseTimestamp int64 | maxTimestamp int64 | producerId int64 |
//	producerEpoch int16 | baseSequence int32 | numRecords int32 | records
//
// all big endian; batchLength counts the bytes after itself and crc is the
// CRC-32C (Castagnoli) of everything from attributes to the end. Records are
// varint framed (see Kafka's DefaultRecord) and compressed as a whole with
// the codec in attributes bits 0-2 (gzip, snappy raw or xerial framed, lz4
// frame, zstd).
//
// Validate is what the broker runs on every Produce request; its sentinel
// errors map one to one to Kafka error codes. Decompression during
// validation is streaming, so a highly compressible batch costs time in
// proportion to its decompressed size but constant memory; the
// decompressed size is capped at DecompressionRatio times the batch size
// limit (ErrTooLarge), zstd windows at 8 MiB, and the batches decompressed
// at once at a few per CPU (compression.go). The record
// walker is hand written rather than kmsg's Record.ReadFrom because it must
// check that every record fills exactly the length it declares and must not
// allocate for keys and values it only skips; tests cross-check it against
// kmsg's encoder and decoder.
//
// Control batches (transaction markers, control.go) are never accepted
// from producers; the broker builds them with BuildMarker for
// WriteTxnMarkers and reads their type with ParseMarker.
//
// SetBaseOffset and SetPartitionLeaderEpoch touch fields outside the CRC and
// so are free; SetLogAppendTime rewrites attributes and maxTimestamp and
// recomputes the CRC.
package record
