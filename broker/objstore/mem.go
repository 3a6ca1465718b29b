package objstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Mem is an in-memory Store for unit tests and tools that need no
// durability. Reads return copies.
type Mem struct {
	bucket string
	mu     sync.Mutex
	objs   map[string]memObject
}

type memObject struct {
	data     []byte
	modified time.Time
}

var _ Store = (*Mem)(nil)

// NewMem returns an empty in-memory bucket.
func NewMem(bucket string) *Mem { return &Mem{bucket: bucket, objs: map[string]memObject{}} }

// Bucket implements Store.
func (m *Mem) Bucket() string { return m.bucket }

// Put implements Store.
func (m *Mem) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[key] = memObject{data: append([]byte(nil), data...), modified: time.Now()}
	return nil
}

// Get implements Store.
func (m *Mem) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if offset < 0 || length == 0 {
		return nil, fmt.Errorf("objstore: get %s: invalid range offset %d length %d", key, offset, length)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	if !ok {
		return nil, fmt.Errorf("objstore: get mem://%s/%s: %w", m.bucket, key, ErrNotFound)
	}
	if offset >= int64(len(o.data)) {
		return nil, fmt.Errorf("objstore: get mem://%s/%s: range starts at %d past the end (%d bytes)", m.bucket, key, offset, len(o.data))
	}
	end := int64(len(o.data))
	if length > 0 && offset+length < end {
		end = offset + length
	}
	return append([]byte(nil), o.data[offset:end]...), nil
}

// Head implements Store.
func (m *Mem) Head(ctx context.Context, key string) (ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	if !ok {
		return ObjectInfo{}, fmt.Errorf("objstore: head mem://%s/%s: %w", m.bucket, key, ErrNotFound)
	}
	return ObjectInfo{Key: key, Size: int64(len(o.data)), LastModified: o.modified}, nil
}

// Delete implements Store.
func (m *Mem) Delete(ctx context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
	return nil
}

// DeleteMany implements BatchDeleter.
func (m *Mem) DeleteMany(ctx context.Context, keys []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		delete(m.objs, k)
	}
	return nil
}

// List implements Store.
func (m *Mem) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ObjectInfo
	for k, o := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(o.data)), LastModified: o.modified})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}
