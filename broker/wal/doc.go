// Package wal owns the fast-tier write-ahead log: the WAL object format,
// the uploader that turns a leader's appends into objects, the pointers and
// per-partition pointer index that tell followers where the data is, the
// downloader followers use to fetch and verify it, and the bookkeeping that
// decides when an object may be deleted. See docs/wal.md.
//
// # Object format (version 1)
//
// All integers big endian; strings are a uint16 length and UTF-8 bytes.
//
//	header   magic "SWAL" | version u16 | flags u16 (0) |
//	         headerLength u32 | chunkCount u32 | tableLength u32 |
//	         brokerID i32 | incarnation u64 | sequence u64 |
//	         createdAt i64 (Unix ms) | cluster str | zone str |
//	         headerCRC u32            (CRC-32C of the header before it)
//	table    chunkCount × ( topic str | partition i32 | leaderEpoch i32 |
//	         baseOffset i64 | lastOffset i64 | byteOffset u64 |
//	         length u32 | crc u32 )  |
//	         tableCRC u32             (CRC-32C of the entries)
//	data     the chunks' record batches, exactly as in the leader's log,
//	         chunk after chunk in table order
//
// headerLength + tableLength is where the data starts, so the first 48
// bytes of an object tell a reader how much more to read for the table
// (HeaderTableSize). Byte offsets in the table are from the object's start,
// so a Pointer's range is a ready-made HTTP Range. A chunk holds
// contiguous-offset batches of one partition and one leader epoch; each
// chunk has its own CRC-32C, so a damaged chunk fails alone and the rest of
// the object stays usable. Chunks are ordered by follower set, topic,
// partition (SortChunks) so that all chunks one follower needs are adjacent
// and one ranged GET serves them.
//
// Object keys are wal/<cluster>/<zone>/<brokerID>/<incarnation>/<seq:020d>.
// <cluster> may contain '/' (brokers configured by the operator run as
// <namespace>/<name>); ParseKey takes the last four segments as zone,
// broker ID, incarnation and sequence.
package wal
