package log

import (
	"io"
)

// Verify reads every segment and checks every batch's frame, CRC-32C and
// offsets. Open re-reads only the last segment after a crash (the others
// were fsynced before their successor existed), so damage to older
// segments — a failing disk, a stray write — is found here, as a
// *CorruptionError naming the file and byte offset of the first bad batch.
// It holds the log's I/O lock shared: appends and reads continue.
func (l *Log) Verify() error {
	l.ioMu.RLock()
	defer l.ioMu.RUnlock()
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	type view struct {
		seg  *segment
		size int64
	}
	var views []view
	for _, s := range l.segs {
		views = append(views, view{s, s.size})
	}
	l.mu.RUnlock()
	for _, v := range views {
		sc := newScanner(v.seg.f, 0, v.size, v.seg.base)
		for {
			_, pos, err := sc.scan()
			if err == io.EOF {
				break
			}
			if err != nil {
				return &CorruptionError{File: v.seg.name, Offset: pos, Err: err}
			}
		}
	}
	return nil
}
