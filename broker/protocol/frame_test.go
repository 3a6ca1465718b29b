package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeRequest frames a request body with a v1/v2 request header (no size
// prefix).
func encodeRequest(req kmsg.Request, correlationID int32, clientID *string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	if clientID == nil {
		b = binary.BigEndian.AppendUint16(b, 0xffff)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(*clientID)))
		b = append(b, *clientID...)
	}
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func strp(s string) *string { return &s }

func TestDecodeRequest(t *testing.T) {
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	topic := "orders"
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	good := encodeRequest(meta, 7, strp("client-1"))

	apiv := kmsg.NewPtrApiVersionsRequest()
	apiv.Version = 0
	nullClient := encodeRequest(apiv, 9, nil)

	// A flexible header whose tag section has one tag of 3 bytes.
	withTag := binary.BigEndian.AppendUint16(nil, uint16(kmsg.Metadata))
	withTag = binary.BigEndian.AppendUint16(withTag, 12)
	withTag = binary.BigEndian.AppendUint32(withTag, 1)
	withTag = binary.BigEndian.AppendUint16(withTag, 0xffff)
	withTag = append(withTag, 1, 5, 3, 'a', 'b', 'c')
	withTag = meta.AppendTo(withTag)

	tests := []struct {
		name    string
		in      []byte
		wantErr error
		check   func(t *testing.T, h Header, req kmsg.Request)
	}{
		{name: "flexible metadata", in: good, check: func(t *testing.T, h Header, req kmsg.Request) {
			if h.Key != 3 || h.Version != 12 || h.CorrelationID != 7 || h.ClientID == nil || *h.ClientID != "client-1" {
				t.Fatalf("header = %+v", h)
			}
			got := req.(*kmsg.MetadataRequest)
			if len(got.Topics) != 1 || *got.Topics[0].Topic != "orders" {
				t.Fatalf("topics = %+v", got.Topics)
			}
		}},
		{name: "null client ID", in: nullClient, check: func(t *testing.T, h Header, _ kmsg.Request) {
			if h.ClientID != nil || h.CorrelationID != 9 {
				t.Fatalf("header = %+v", h)
			}
		}},
		{name: "header tags skipped", in: withTag, check: func(t *testing.T, _ Header, req kmsg.Request) {
			if got := req.(*kmsg.MetadataRequest); len(got.Topics) != 1 {
				t.Fatalf("topics = %+v", got.Topics)
			}
		}},
		{name: "short header", in: []byte{0, 3, 0}, wantErr: ErrMalformed},
		{name: "unknown key", in: []byte{0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff}, wantErr: ErrUnknownKey},
		{name: "unsupported version", in: []byte{0, 3, 0, 99, 0, 0, 0, 1, 0xff, 0xff}, wantErr: ErrUnsupportedVersion},
		{name: "client ID longer than frame", in: []byte{0, 18, 0, 0, 0, 0, 0, 1, 0, 50, 'a'}, wantErr: ErrMalformed},
		{name: "bad client ID length", in: []byte{0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xfe}, wantErr: ErrMalformed},
		{name: "missing client ID", in: []byte{0, 18, 0, 0, 0, 0, 0, 1}, wantErr: ErrMalformed},
		{name: "truncated body", in: good[:len(good)-3], wantErr: ErrMalformed},
		{name: "tag size past end", in: append(append([]byte{}, withTag[:10]...), 1, 5, 100), wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, req, err := DecodeRequest(tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeRequest: %v", err)
			}
			tt.check(t, h, req)
		})
	}
}

func TestReadFrame(t *testing.T) {
	frame := func(size int32, payload []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(size)), payload...)
	}
	payload := bytes.Repeat([]byte{1}, 20)
	tests := []struct {
		name    string
		in      []byte
		wantErr error
	}{
		{name: "ok", in: frame(20, payload)},
		{name: "negative size", in: frame(-1, payload), wantErr: ErrBadFrame},
		{name: "size below header", in: frame(3, payload), wantErr: ErrBadFrame},
		{name: "too large", in: frame(1<<20+1, payload), wantErr: ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readFrame(bytes.NewReader(tt.in), 1<<20, nil, nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && !bytes.Equal(got, payload) {
				t.Fatalf("payload = %x", got)
			}
		})
	}
}

func TestResponseHeader(t *testing.T) {
	// Flexible responses get header v1 (a tag byte), ApiVersions never does.
	meta := kmsg.NewPtrMetadataResponse()
	meta.Version = 12
	apiv := kmsg.NewPtrApiVersionsResponse()
	apiv.Version = 4
	for _, tt := range []struct {
		resp    kmsg.Response
		wantTag bool
	}{{meta, true}, {apiv, false}} {
		b := appendResponse(nil, 42, tt.resp)
		if got := int(binary.BigEndian.Uint32(b)); got != len(b)-4 {
			t.Fatalf("%T: size %d, frame %d", tt.resp, got, len(b)-4)
		}
		if cid := int32(binary.BigEndian.Uint32(b[4:])); cid != 42 {
			t.Fatalf("correlation ID %d", cid)
		}
		body := tt.resp.AppendTo(nil)
		headerLen := len(b) - 4 - len(body)
		if want := map[bool]int{true: 5, false: 4}[tt.wantTag]; headerLen != want {
			t.Fatalf("%T: header %d bytes, want %d", tt.resp, headerLen, want)
		}
	}
}

func TestRegistryServesEveryVersionKmsgCanRead(t *testing.T) {
	for _, api := range APIs() {
		for v := api.Min; v <= api.Max; v++ {
			req := kmsg.RequestForKey(api.Key)
			req.SetVersion(v)
			if _, _, err := DecodeRequest(encodeRequest(req, 1, strp("t"))); err != nil {
				t.Errorf("%s v%d: default request does not decode: %v", kmsg.NameForKey(api.Key), v, err)
			}
		}
	}
}
