package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultMaxRequestBytes is Kafka's socket.request.max.bytes default.
const DefaultMaxRequestBytes = 100 << 20

// DefaultMaxNonProduceRequestBytes bounds requests other than Produce.
const DefaultMaxNonProduceRequestBytes = 8 << 20

var (
	// ErrFrameTooLarge is returned for a size prefix over the maximum.
	ErrFrameTooLarge = errors.New("request frame too large")
	// ErrBadFrame is returned for a negative or too small size prefix.
	ErrBadFrame = errors.New("bad request frame size")
	// ErrUnknownKey is returned for an API key that is not served.
	ErrUnknownKey = errors.New("unknown API key")
	// ErrUnsupportedVersion is returned for a version outside the served range.
	ErrUnsupportedVersion = errors.New("unsupported API version")
	// ErrMalformed is returned for a header or body that does not decode.
	ErrMalformed = errors.New("malformed request")

	// errIdle: the read deadline passed between frames.
	errIdle = errors.New("connection idle")
)

// minHeaderBytes is key + version + correlation ID.
const minHeaderBytes = 2 + 2 + 4

// readFrame reads one size-prefixed frame and returns the payload. The
// size, then the API key (the payload's first two bytes), are checked, and
// check and admit (each if not nil) are called with both, before the frame is
// allocated: a declared size costs nothing until it is admitted. Of a frame larger than
// smallFrameBytes, the first smallFrameBytes are read before admit, so a
// client that declares a large frame and does not send it never holds
// admitted memory. An admit error is returned as is.
func readFrame(r io.Reader, maxBytes int32, check, admit func(key int16, size int32) error) ([]byte, error) {
	var hdr [4 + 2]byte
	if n, err := io.ReadFull(r, hdr[:4]); err != nil {
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, errIdle
		}
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(hdr[:4]))
	switch {
	case n < minHeaderBytes:
		return nil, fmt.Errorf("%w: %d bytes", ErrBadFrame, n)
	case n > maxBytes:
		return nil, fmt.Errorf("%w: %d bytes, max %d", ErrFrameTooLarge, n, maxBytes)
	}
	if _, err := io.ReadFull(r, hdr[4:]); err != nil {
		return nil, fmt.Errorf("reading %d byte frame: %w", n, noEOF(err))
	}
	key := int16(binary.BigEndian.Uint16(hdr[4:]))
	if check != nil {
		if err := check(key, n); err != nil {
			return nil, err
		}
	}
	var head []byte // the body's start, read before admission
	if admit != nil && n > smallFrameBytes {
		head = make([]byte, smallFrameBytes)
		if _, err := io.ReadFull(r, head); err != nil {
			return nil, fmt.Errorf("reading %d byte frame: %w", n, noEOF(err))
		}
	}
	if admit != nil {
		if err := admit(key, n); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, n)
	copy(buf, hdr[4:])
	copy(buf[2:], head)
	if _, err := io.ReadFull(r, buf[2+len(head):]); err != nil {
		return nil, fmt.Errorf("reading %d byte frame: %w", n, noEOF(err))
	}
	return buf, nil
}

// noEOF: a frame cut short is an unexpected EOF, not a clean close.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// DecodeRequest decodes one request frame payload (the bytes after the size
// prefix). On ErrUnsupportedVersion the returned header is valid (key,
// version and correlation ID are set) so that ApiVersions can be answered.
// The returned request does not alias b.
func DecodeRequest(b []byte) (Header, kmsg.Request, error) {
	return decodeRequest(b, true)
}

// decodeRequest is DecodeRequest; with copyBody false the request may alias
// b (record batches of Produce do), which the server allows because every
// frame gets its own buffer.
func decodeRequest(b []byte, copyBody bool) (Header, kmsg.Request, error) {
	var h Header
	if len(b) < minHeaderBytes {
		return h, nil, fmt.Errorf("%w: %d byte header", ErrMalformed, len(b))
	}
	h.Key = int16(binary.BigEndian.Uint16(b[0:]))
	h.Version = int16(binary.BigEndian.Uint16(b[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(b[4:]))
	b = b[minHeaderBytes:]

	api, ok := Lookup(h.Key)
	if !ok {
		return h, nil, fmt.Errorf("%w %d", ErrUnknownKey, h.Key)
	}
	if h.Version < api.Min || h.Version > api.Max {
		return h, nil, fmt.Errorf("%w: %s v%d (served %d-%d)", ErrUnsupportedVersion, kmsg.NameForKey(h.Key), h.Version, api.Min, api.Max)
	}
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)

	// Header v1+: nullable client ID (int16 length, -1 is null).
	if len(b) < 2 {
		return h, nil, fmt.Errorf("%w: missing client ID", ErrMalformed)
	}
	idLen := int16(binary.BigEndian.Uint16(b))
	b = b[2:]
	if idLen >= 0 {
		if int(idLen) > len(b) {
			return h, nil, fmt.Errorf("%w: client ID length %d over %d remaining bytes", ErrMalformed, idLen, len(b))
		}
		id := string(b[:idLen])
		h.ClientID = &id
		b = b[idLen:]
	} else if idLen != -1 {
		return h, nil, fmt.Errorf("%w: client ID length %d", ErrMalformed, idLen)
	}
	// Header v2 (flexible requests): tagged fields, none of which we use.
	if req.IsFlexible() {
		var err error
		if b, err = skipTags(b); err != nil {
			return h, nil, fmt.Errorf("%w: request header tags: %v", ErrMalformed, err)
		}
	}
	body := b
	if copyBody {
		body = append([]byte(nil), b...)
	}
	if err := req.ReadFrom(body); err != nil {
		return h, nil, fmt.Errorf("%w: %s v%d body: %v", ErrMalformed, kmsg.NameForKey(h.Key), h.Version, err)
	}
	return h, req, nil
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	n, b, err := uvarint(b)
	if err != nil {
		return nil, err
	}
	for range n {
		if _, b, err = uvarint(b); err != nil { // tag
			return nil, err
		}
		var size uint64
		if size, b, err = uvarint(b); err != nil {
			return nil, err
		}
		if size > uint64(len(b)) {
			return nil, fmt.Errorf("tag size %d over %d remaining bytes", size, len(b))
		}
		b = b[size:]
	}
	return b, nil
}

func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || v > 1<<31 {
		return 0, nil, errors.New("bad uvarint")
	}
	return v, b[n:], nil
}

// appendResponse appends a complete size-prefixed response frame. Responses
// use header v1 (with an empty tag section) when flexible, except
// ApiVersions, which always answers with header v0 so that a client that
// does not know the broker's versions yet can read it.
func appendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0) // size, patched below
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		dst = append(dst, 0) // no tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
