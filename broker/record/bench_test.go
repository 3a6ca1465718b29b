package record

import (
	"testing"
)

// BenchmarkValidate validates a batch of 100 records of 100 bytes per
// codec; bytes/s are uncompressed record bytes.
func BenchmarkValidate(b *testing.B) {
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			recs := testRecords(100, 100)
			bt := mustBuild(b, specWith(c), recs)
			raw := 0
			for _, r := range recs {
				raw += len(r.Value) + len(r.Key)
			}
			b.SetBytes(int64(raw))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := Validate(bt, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
