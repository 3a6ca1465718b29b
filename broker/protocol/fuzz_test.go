package protocol

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDecodeRequest feeds arbitrary frame payloads to DecodeRequest. It
// must never panic, and whatever decodes must re-encode stably (encode,
// decode, encode gives the same bytes). The seed corpus (run by go test)
// is a default request of every registered key and version, plus a few
// hostile headers.
func FuzzDecodeRequest(f *testing.F) {
	for _, api := range APIs() {
		for v := api.Min; v <= api.Max; v++ {
			req := kmsg.RequestForKey(api.Key)
			req.SetVersion(v)
			f.Add(encodeRequest(req, 1, strp("fuzz")))
		}
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 1
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: strp("a")}, {Topic: strp("b")}}
	f.Add(encodeRequest(meta, 2, nil))
	f.Add([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, req, err := DecodeRequest(b)
		if err != nil {
			return
		}
		if req.Key() != h.Key || req.GetVersion() != h.Version {
			t.Fatalf("decoded %s v%d for header %+v", kmsg.NameForKey(req.Key()), req.GetVersion(), h)
		}
		enc1 := req.AppendTo(nil)
		again := kmsg.RequestForKey(h.Key)
		again.SetVersion(h.Version)
		if err := again.ReadFrom(enc1); err != nil {
			t.Fatalf("re-decoding our own encoding of %s v%d: %v", kmsg.NameForKey(h.Key), h.Version, err)
		}
		if enc2 := again.AppendTo(nil); !bytes.Equal(enc1, enc2) {
			t.Fatalf("%s v%d does not re-encode stably:\n%x\n%x", kmsg.NameForKey(h.Key), h.Version, enc1, enc2)
		}
	})
}
