package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzReadFrame feeds arbitrary byte streams to the frame reader, with
// the limits the server gives it. It must never panic; it returns either
// an error or exactly the frame the stream declares, which is within the
// size limit; check and admit see the declared size and API key before
// the frame is read, and admit is never called for a frame check refused
// or one over the limit. Each frame read is decoded as a request header
// too (FuzzDecodeRequest fuzzes bodies).
func FuzzReadFrame(f *testing.F) {
	f.Add(appendRequest(kmsg.NewPtrApiVersionsRequest(), 1), int32(DefaultMaxRequestBytes))
	f.Add(appendRequest(kmsg.NewPtrMetadataRequest(), 2), int32(1024))
	f.Add(frameHeader(100<<20, kmsg.Produce), int32(DefaultMaxRequestBytes))
	f.Add(append(frameHeader(smallFrameBytes+10, kmsg.Produce), make([]byte, smallFrameBytes+8)...), int32(DefaultMaxRequestBytes))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0}, int32(DefaultMaxRequestBytes))
	f.Add([]byte{0, 0, 0, 3, 0, 18, 0}, int32(64))
	f.Fuzz(func(t *testing.T, in []byte, maxBytes int32) {
		if maxBytes < minHeaderBytes {
			maxBytes = minHeaderBytes
		}
		checked, admitted := false, false
		var gotKey int16
		var gotSize int32
		check := func(key int16, size int32) error {
			checked, gotKey, gotSize = true, key, size
			if key == kmsg.Metadata.Int16() && size > 512 {
				return ErrFrameTooLarge
			}
			return nil
		}
		admit := func(key int16, size int32) error {
			if !checked || key != gotKey || size != gotSize {
				t.Fatalf("admit(%d, %d) without the check of the same frame", key, size)
			}
			admitted = true
			return nil
		}
		frame, err := readFrame(bytes.NewReader(in), maxBytes, check, admit)
		if err != nil {
			if errors.Is(err, ErrFrameTooLarge) && admitted {
				t.Fatalf("a refused frame was admitted: %v", err)
			}
			return
		}
		if len(in) < 4 {
			t.Fatalf("a frame from %d bytes", len(in))
		}
		size := int32(binary.BigEndian.Uint32(in))
		switch {
		case !admitted:
			t.Fatal("a frame read without admission")
		case size > maxBytes || int(size) != len(frame) || size != gotSize:
			t.Fatalf("frame of %d bytes for a declared %d (checked %d), max %d", len(frame), size, gotSize, maxBytes)
		case !bytes.Equal(frame, in[4:4+size]):
			t.Fatal("the frame is not the stream's bytes")
		case int16(binary.BigEndian.Uint16(frame)) != gotKey:
			t.Fatalf("checked key %d, frame key %d", gotKey, int16(binary.BigEndian.Uint16(frame)))
		}
		_, _, _ = decodeRequest(frame, true)
	})
}
