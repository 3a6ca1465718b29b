package record

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Decompression streams: records are checked as they come out of the
// decompressor through a small bufio.Reader, so validating a batch takes
// constant memory however well it compresses (gzip, lz4, zstd, xerial
// snappy), and stops with ErrTooLarge once the caller's limit of
// decompressed bytes is passed (CPU time stays in proportion). Raw
// (unframed) snappy is one block and is decoded whole; its declared size
// is bounded by maxSnappyRatio and the limit.
//
// Decoder memory: a zstd decoder keeps a window of up to zstdMaxWindow, an
// lz4 or gzip reader a few hundred KiB, a xerial block 24 times a chunk.
// At most decoderSlots batches are decompressed at once (the others wait:
// it is CPU work anyway), so decoders hold at most decoderSlots windows,
// in use or pooled.

// maxSnappyRatio bounds the declared decoded size of a raw snappy block
// relative to its compressed size. Snappy's densest element (a 3-byte copy
// of 64 bytes) expands about 21 times; anything claiming more is not snappy.
const maxSnappyRatio = 24

// zstdMaxWindow bounds the zstd window a batch may ask for: 8 MiB, the
// size RFC 8878 asks every decoder to support. Kafka producers compress
// batches of at most a few MiB, whose windows are smaller; a frame of a
// few bytes declaring a larger window is refused before it is allocated.
const zstdMaxWindow = 8 << 20

// decoderSlots bounds the batches decompressed at once.
var decoderSlots = make(chan struct{}, max(4, 2*runtime.GOMAXPROCS(0)))

const bufSize = 16 << 10

var (
	gzipPool = sync.Pool{New: func() any { return new(gzip.Reader) }}
	lz4Pool  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	zstdPool = sync.Pool{New: func() any {
		// Concurrency 1 decodes synchronously: no goroutines to leak.
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow), zstd.WithDecoderMaxMemory(zstdMaxWindow))
		if err != nil {
			panic(err) // only options are checked here; ours are constant
		}
		return d
	}}
	bufioPool  = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
	xerialPool = sync.Pool{New: func() any { return new(xerialReader) }}
)

// openPayload returns a reader of the decompressed records, which fails
// with ErrTooLarge past limit bytes, and a function releasing pooled state
// (and the decoder slot).
func openPayload(c Codec, payload []byte, limit int64) (byteSource, func(), error) {
	if c == None {
		// Uncompressed records count against the same budget.
		if int64(len(payload)) > limit {
			return nil, nil, fmt.Errorf("%w: %d bytes of records, limit %d", ErrTooLarge, len(payload), limit)
		}
		return &sliceReader{b: payload}, func() {}, nil
	}
	decoderSlots <- struct{}{}
	src, release, err := openDecoder(c, payload, limit)
	if err != nil {
		<-decoderSlots
		return nil, nil, err
	}
	return src, func() {
		release()
		<-decoderSlots
	}, nil
}

func openDecoder(c Codec, payload []byte, limit int64) (byteSource, func(), error) {
	var (
		r       io.Reader
		release func()
	)
	switch c {
	case Gzip:
		zr := gzipPool.Get().(*gzip.Reader)
		if err := zr.Reset(bytes.NewReader(payload)); err != nil {
			gzipPool.Put(zr)
			return nil, nil, fmt.Errorf("%w: gzip: %w", ErrCorrupt, err)
		}
		zr.Multistream(true)
		r, release = zr, func() { gzipPool.Put(zr) }
	case Snappy:
		if bytes.HasPrefix(payload, xerialMagic) {
			x := xerialPool.Get().(*xerialReader)
			x.src, x.started, x.block = payload, false, nil
			r, release = x, func() {
				x.src, x.block = nil, nil
				xerialPool.Put(x)
			}
			break
		}
		n, err := s2.DecodedLen(payload)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
		}
		if n > maxSnappyRatio*len(payload)+64 {
			return nil, nil, fmt.Errorf("%w: snappy block claims %d bytes from %d", ErrCorrupt, n, len(payload))
		}
		if int64(n) > limit {
			return nil, nil, fmt.Errorf("%w: records decompress to %d bytes, limit %d", ErrTooLarge, n, limit)
		}
		out, err := s2.Decode(nil, payload)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
		}
		return &sliceReader{b: out}, func() {}, nil
	case LZ4:
		zr := lz4Pool.Get().(*lz4.Reader)
		zr.Reset(bytes.NewReader(payload))
		r, release = zr, func() { lz4Pool.Put(zr) }
	case Zstd:
		zr := zstdPool.Get().(*zstd.Decoder)
		if err := zr.Reset(bytes.NewReader(payload)); err != nil {
			zstdPool.Put(zr)
			return nil, nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
		}
		r, release = zr, func() {
			_ = zr.Reset(nil) // drop the reference to payload
			zstdPool.Put(zr)
		}
	default:
		return nil, nil, fmt.Errorf("%w: %v", ErrUnsupportedCodec, c)
	}
	br := bufioPool.Get().(*bufio.Reader)
	br.Reset(&limitReader{r: corruptOnError{r}, left: limit, limit: limit})
	return br, func() {
		br.Reset(nil)
		bufioPool.Put(br)
		release()
	}, nil
}

// limitReader fails with ErrTooLarge once more than limit bytes came out.
type limitReader struct {
	r           io.Reader
	left, limit int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells a stream of exactly limit bytes (fine) from
		// a longer one.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%w: records decompress to more than %d bytes", ErrTooLarge, l.limit)
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// corruptOnError marks every failure of a decompressor, except the end of
// its output, as ErrCorrupt.
type corruptOnError struct{ r io.Reader }

func (c corruptOnError) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: decompressing: %w", ErrCorrupt, err)
	}
	return n, err
}

// xerialMagic starts snappy payloads framed the way the Java client's
// snappy-java SnappyOutputStream writes them: the magic, two big endian
// int32 versions, then blocks of a big endian int32 length and a raw snappy
// block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

var errXerial = errors.New("malformed xerial snappy framing")

// xerialReader decodes xerial framed snappy one block at a time.
type xerialReader struct {
	src     []byte
	started bool
	block   []byte // undelivered part of buf
	buf     []byte
}

func (x *xerialReader) Read(p []byte) (int, error) {
	for len(x.block) == 0 {
		if !x.started {
			if len(x.src) < xerialHeaderSize {
				return 0, errXerial
			}
			x.src, x.started = x.src[xerialHeaderSize:], true
		}
		if len(x.src) == 0 {
			return 0, io.EOF
		}
		if len(x.src) < 4 {
			return 0, errXerial
		}
		n := binary.BigEndian.Uint32(x.src)
		if uint64(n) > uint64(len(x.src)-4) {
			return 0, errXerial
		}
		chunk := x.src[4 : 4+n]
		x.src = x.src[4+n:]
		dl, err := s2.DecodedLen(chunk)
		if err != nil {
			return 0, err
		}
		if dl > maxSnappyRatio*len(chunk)+64 {
			return 0, fmt.Errorf("snappy block claims %d bytes from %d", dl, len(chunk))
		}
		if x.buf, err = s2.Decode(x.buf[:cap(x.buf)], chunk); err != nil {
			return 0, err
		}
		x.block = x.buf
	}
	n := copy(p, x.block)
	x.block = x.block[n:]
	return n, nil
}
