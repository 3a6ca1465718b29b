package objstore

import (
	"context"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// PrefixLister is implemented by stores that list the "directories" below
// a prefix without listing every object in them (S3 ListObjectsV2 with a
// delimiter). Use ListPrefixes rather than calling it.
type PrefixLister interface {
	// ListPrefixes returns the distinct key prefixes below prefix up to
	// and including the next "/" (S3's CommonPrefixes), in key order.
	ListPrefixes(ctx context.Context, prefix string) ([]string, error)
}

// ListPrefixes returns the distinct prefixes below prefix up to the next
// "/", in key order: with one request per 1000 prefixes on a PrefixLister,
// by listing every object otherwise. Objects directly below prefix (with
// no further "/") are not returned.
func ListPrefixes(ctx context.Context, st Store, prefix string) ([]string, error) {
	if pl, ok := st.(PrefixLister); ok {
		return pl.ListPrefixes(ctx, prefix)
	}
	objs, err := st.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range objs {
		rest := o.Key[len(prefix):]
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			continue
		}
		p := prefix + rest[:i+1]
		if len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out, nil
}

// ListPrefixes implements PrefixLister with ListObjectsV2's delimiter.
func (s *S3) ListPrefixes(ctx context.Context, prefix string) (out []string, err error) {
	start := time.Now()
	defer func() { s.observe(OpList, start, 0, err) }()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(prefix), Delimiter: aws.String("/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list", prefix, err)
		}
		for _, cp := range page.CommonPrefixes {
			out = append(out, aws.ToString(cp.Prefix))
		}
	}
	return out, nil
}

// ListPrefixes passes through with the faults of a List.
func (f *Faulty) ListPrefixes(ctx context.Context, prefix string) ([]string, error) {
	if err := f.enter(ctx, OpList); err != nil {
		return nil, err
	}
	return ListPrefixes(ctx, f.inner, prefix)
}
