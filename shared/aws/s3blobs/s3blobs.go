// Package s3blobs keeps the turn store's large payloads in S3: message
// payloads, tool outputs and other turn items whose JSON is over the
// DynamoDB store's threshold (shared/aws/dynamostore) are written here,
// content-addressed, and the item keeps only the object's key.
//
// Objects are encrypted at rest by the bucket's default encryption (the
// stack's KMS key through S3, with an S3 Bucket Key). This package must
// never log an object's content; its errors name the operation, the key
// and awserr.Describe of the cause, never a body.
package s3blobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/agentauth/agentauth/shared/aws/awserr"
	"github.com/agentauth/agentauth/shared/domain"
)

// S3API is what the store needs of the S3 client.
type S3API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
}

// MaxObjectBytes bounds what Get reads: the turn store's items are far
// smaller (a model answer, a tool output).
const MaxObjectBytes = 16 << 20

// Store is a bucket of content-addressed objects.
type Store struct {
	api    S3API
	bucket string
}

// New returns the store on bucket.
func New(api S3API, bucket string) (*Store, error) {
	if api == nil || bucket == "" {
		return nil, errors.New("s3blobs: an S3 client and a bucket name are required")
	}
	return &Store{api: api, bucket: bucket}, nil
}

// Put writes data at key. The caller names objects by the SHA-256 of
// their content, so a repeated Put (a retried commit) writes the same
// bytes again; S3 checks them against the checksum sent.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	sum := sha256.Sum256(data)
	_, err := s.api.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), ContentType: aws.String("application/json"),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	})
	if err != nil {
		return fmt.Errorf("s3blobs: put %s: %s", key, awserr.Describe(err))
	}
	return nil
}

// Get reads the object at key: domain.ErrNotFound when there is none.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		var nsk *types.NoSuchKey
		if errors.As(err, &nsk) || awserr.Code(err) == "NoSuchKey" {
			return nil, fmt.Errorf("s3blobs: get %s: %w", key, domain.ErrNotFound)
		}
		return nil, fmt.Errorf("s3blobs: get %s: %s", key, awserr.Describe(err))
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, MaxObjectBytes+1))
	if err != nil {
		return nil, fmt.Errorf("s3blobs: get %s: read: %w", key, err)
	}
	if len(b) > MaxObjectBytes {
		return nil, fmt.Errorf("s3blobs: get %s: over %d bytes: %w", key, MaxObjectBytes, domain.ErrCorrupt)
	}
	return b, nil
}

// maxDeletePages bounds DeletePrefix's listing (10^8 objects): a listing
// that never ends is a broken endpoint, not a folder.
const maxDeletePages = 100000

// DeletePrefix removes every object whose key starts with prefix (which
// must end with '/'), a page of up to 1000 at a time.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) error {
	if !strings.HasSuffix(prefix, "/") || len(prefix) < 2 {
		return fmt.Errorf("s3blobs: delete prefix %q: want a folder ending with '/'", prefix)
	}
	var token *string
	for page := 0; ; page++ {
		if page >= maxDeletePages {
			return fmt.Errorf("s3blobs: delete prefix %s: too many pages", prefix)
		}
		out, err := s.api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix), ContinuationToken: token})
		if err != nil {
			return fmt.Errorf("s3blobs: list %s: %s", prefix, awserr.Describe(err))
		}
		if len(out.Contents) > 0 {
			ids := make([]types.ObjectIdentifier, 0, len(out.Contents))
			for _, o := range out.Contents {
				ids = append(ids, types.ObjectIdentifier{Key: o.Key})
			}
			res, err := s.api.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(s.bucket), Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
			if err != nil {
				return fmt.Errorf("s3blobs: delete under %s: %s", prefix, awserr.Describe(err))
			}
			if len(res.Errors) > 0 {
				return fmt.Errorf("s3blobs: delete under %s: %d of %d objects not deleted (first: %s)", prefix, len(res.Errors), len(ids), aws.ToString(res.Errors[0].Code))
			}
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return nil
		}
		token = out.NextContinuationToken
	}
}

// Key is the key of content under prefix: "<prefix><SHA-256 hex>".
func Key(prefix string, content []byte) string {
	sum := sha256.Sum256(content)
	return prefix + hex.EncodeToString(sum[:])
}
