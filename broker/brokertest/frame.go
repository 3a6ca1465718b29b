package brokertest

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// RequestFrame encodes req (at the version set on it) as one size-prefixed
// Kafka request with header v1 (v2 for flexible versions) and client id
// "test", for tests that speak the wire protocol on a raw connection:
// pipelining, fire-and-forget writes, malformed input around valid frames.
func RequestFrame(req kmsg.Request, correlationID int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0) // empty tagged fields
	}
	b = req.AppendTo(b)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}
