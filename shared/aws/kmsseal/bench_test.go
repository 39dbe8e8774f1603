package kmsseal

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
)

// BenchmarkOpenWarm is a token read with its data key cached: no KMS call,
// one cache lookup and one AES-GCM open.
func BenchmarkOpenWarm(b *testing.B) {
	f := newFakeKMS("k1")
	s := mustNew(b, f, "k1", Options{})
	bd := bind("grant-A", domain.FieldAccessToken)
	v := mustSeal(b, s, access, bd)
	ctx := context.Background()
	before := f.count("Decrypt") + f.count("GenerateDataKey")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Open(ctx, v, bd); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(f.count("Decrypt")+f.count("GenerateDataKey")-before)/float64(b.N), "kms-calls/op")
}

func BenchmarkOpenWarmParallel(b *testing.B) {
	f := newFakeKMS("k1")
	s := mustNew(b, f, "k1", Options{})
	bd := bind("grant-A", domain.FieldAccessToken)
	v := mustSeal(b, s, access, bd)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Open(context.Background(), v, bd); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkOpenCold pays one Decrypt of the in-process fake per read: the
// sealer's own cost on a miss, without KMS latency.
func BenchmarkOpenCold(b *testing.B) {
	f := newFakeKMS("k1")
	s := mustNew(b, f, "k1", Options{})
	bd := bind("grant-A", domain.FieldAccessToken)
	v := mustSeal(b, s, access, bd)
	ctx := context.Background()
	before := f.count("Decrypt")
	b.ReportAllocs()
	for b.Loop() {
		s.Purge()
		if _, err := s.Open(ctx, v, bd); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(f.count("Decrypt")-before)/float64(b.N), "kms-calls/op")
}

// BenchmarkSealGrant is one grant write: access and refresh token of a new
// grant, one GenerateDataKey.
func BenchmarkSealGrant(b *testing.B) {
	f := newFakeKMS("k1")
	s := mustNew(b, f, "k1", Options{})
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		id := fmt.Sprintf("grant-%d", i)
		i++
		if _, err := s.Seal(ctx, []byte(access), bind(id, domain.FieldAccessToken)); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Seal(ctx, []byte(refresh), bind(id, domain.FieldRefreshToken)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(f.count("GenerateDataKey"))/float64(b.N), "kms-calls/op")
}
