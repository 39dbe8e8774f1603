package gitstore

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/agentauth/agentauth/shared/aws/awserr"
	"github.com/agentauth/agentauth/shared/domain"
)

// S3API is the part of *s3.Client the object database uses: pass the
// client main builds once; tests pass a fake.
type S3API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

var _ S3API = (*s3.Client)(nil)

const (
	// CallTimeout bounds every S3 call of Objects, retries included:
	// go-git's object interface takes no context, so the deadline is ours.
	// A bundle's objects are kilobytes; ten seconds is a stuck connection.
	CallTimeout = 10 * time.Second
	// MaxObjectBytes is the largest object Objects writes or reads (its
	// content, uncompressed): twice changeset's largest readable file.
	MaxObjectBytes = 16 << 20
	// CacheBytes bounds the objects one Objects keeps in memory, by
	// content size.
	CacheBytes = 32 << 20
	// putAttempts bounds the PUTs of one object that S3 answered 409
	// (another conditional write of the same key in flight).
	putAttempts = 4
)

// Objects is a git object database in S3: each object one S3 object,
// named by its git hash, in git's loose-object format (see the package
// documentation). It implements go-git's storer.EncodedObjectStorer, is
// safe for concurrent use, and keeps the objects it read or wrote in a
// bounded cache (objects never change).
type Objects struct {
	api     S3API
	bucket  string
	prefix  string
	timeout time.Duration
	cache   *lru
}

var _ storer.EncodedObjectStorer = (*Objects)(nil)

// NewObjects returns the object database under prefix ("" or a folder
// ending with '/', e.g. "bundles/main/") of bucket. It makes no call.
func NewObjects(api S3API, bucket, prefix string) (*Objects, error) {
	if api == nil {
		return nil, errors.New("gitstore: nil S3 client")
	}
	if bucket == "" {
		return nil, errors.New("gitstore: a bucket name is required")
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("gitstore: %w", err)
	}
	return &Objects{api: api, bucket: bucket, prefix: prefix, timeout: CallTimeout, cache: newLRU(CacheBytes)}, nil
}

// checkPrefix accepts "" or a relative folder of printable ASCII ending
// with '/', with no empty, "." or ".." segment.
func checkPrefix(p string) error {
	if p == "" {
		return nil
	}
	bad := func(why string) error {
		return fmt.Errorf("object prefix %.80q: %s; want \"\" or a folder such as bundles/main/", p, why)
	}
	if len(p) > 512 {
		return bad("longer than 512 bytes")
	}
	if !strings.HasSuffix(p, "/") {
		return bad("does not end with '/'")
	}
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] > '~' {
			return bad("not printable ASCII without spaces")
		}
	}
	for _, seg := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			return bad("an empty, . or .. segment")
		}
	}
	return nil
}

// Key is the S3 key of object h: <prefix>objects/<2 hex>/<38 hex>, the
// path git gives a loose object under .git.
func (o *Objects) Key(h plumbing.Hash) string {
	s := h.String()
	return o.prefix + "objects/" + s[:2] + "/" + s[2:]
}

var errUnsupported = errors.New("gitstore: not supported on the S3 object database")

// NewEncodedObject returns an empty in-memory object to fill and pass to
// SetEncodedObject.
func (o *Objects) NewEncodedObject() plumbing.EncodedObject { return &plumbing.MemoryObject{} }

// SetEncodedObject stores obj under its git hash, computed here from its
// type and content. An object this process knows exists is not written
// again; any other is written on condition that the key is free
// (If-None-Match: *), and an answer that it is taken (412) is success:
// the same name holds the same content.
func (o *Objects) SetEncodedObject(obj plumbing.EncodedObject) (plumbing.Hash, error) {
	t := obj.Type()
	if !storable(t) {
		return plumbing.ZeroHash, fmt.Errorf("gitstore: store an object of type %s: %w", t, plumbing.ErrInvalidType)
	}
	if obj.Size() > MaxObjectBytes {
		return plumbing.ZeroHash, fmt.Errorf("gitstore: store a %s of %d bytes: over %d", t, obj.Size(), MaxObjectBytes)
	}
	data, err := readContent(obj)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	h := plumbing.ComputeHash(t, data)
	if _, known := o.cache.get(h); known {
		return h, nil
	}
	body, err := encode(t, data)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitstore: encode %s %s: %w", t, h, err)
	}
	if err := o.put(h, body); err != nil {
		return plumbing.ZeroHash, err
	}
	o.cache.add(&stored{h: h, t: t, data: data})
	return h, nil
}

func storable(t plumbing.ObjectType) bool {
	switch t {
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
		return true
	}
	return false
}

// readContent reads obj's content, which must be Size() bytes.
func readContent(obj plumbing.EncodedObject) ([]byte, error) {
	r, err := obj.Reader()
	if err != nil {
		return nil, fmt.Errorf("gitstore: read the object to store: %w", err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, MaxObjectBytes+1))
	if err != nil {
		return nil, fmt.Errorf("gitstore: read the object to store: %w", err)
	}
	if int64(len(data)) != obj.Size() {
		return nil, fmt.Errorf("gitstore: the object to store has %d bytes of content, its size says %d", len(data), obj.Size())
	}
	return data, nil
}

// put writes body at h's key unless the key is taken.
func (o *Objects) put(h plumbing.Hash, body []byte) error {
	key := o.Key(h)
	sum := sha256.Sum256(body)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
		_, err := o.api.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(o.bucket), Key: aws.String(key), Body: bytes.NewReader(body),
			ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String(contentType),
			ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
			IfNoneMatch:    aws.String("*"),
		})
		cancel()
		switch {
		case err == nil, isStatus(err, 412, "PreconditionFailed"):
			return nil
		case isStatus(err, 409, "ConditionalRequestConflict") && attempt < putAttempts:
			// Another write of this key is in flight; once it ends the key
			// is taken (412) or free again.
			time.Sleep(time.Duration(attempt*attempt) * 20 * time.Millisecond)
			continue
		}
		return fmt.Errorf("gitstore: put object %s: %w", key, awserr.Safe(err))
	}
}

// contentType labels the objects for whoever browses the bucket.
const contentType = "application/x-git-loose-object"

// EncodedObject reads object h; plumbing.ErrObjectNotFound (itself, not
// wrapped: go-git compares it) when there is none or it is not of type t
// (plumbing.AnyObject: any type).
func (o *Objects) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	s, err := o.load(h)
	if err != nil {
		return nil, err
	}
	if t != plumbing.AnyObject && s.t != t {
		return nil, plumbing.ErrObjectNotFound
	}
	return &readOnly{s: s, t: s.t, size: int64(len(s.data))}, nil
}

// HasEncodedObject answers nil when object h exists, else
// plumbing.ErrObjectNotFound. It reads the object (and keeps it): bundle
// objects are small, and whoever asks usually reads it next.
func (o *Objects) HasEncodedObject(h plumbing.Hash) error {
	if _, known := o.cache.get(h); known {
		return nil
	}
	_, err := o.load(h)
	return err
}

// EncodedObjectSize is the content size of object h.
func (o *Objects) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	s, err := o.load(h)
	if err != nil {
		return 0, err
	}
	return int64(len(s.data)), nil
}

// IterEncodedObjects is not supported: listing the bucket would be the
// only way, and nothing in the changesets needs it.
func (o *Objects) IterEncodedObjects(plumbing.ObjectType) (storer.EncodedObjectIter, error) {
	return nil, errUnsupported
}

// AddAlternate is not supported: there is no other object database.
func (o *Objects) AddAlternate(string) error { return errUnsupported }

// load returns object h from the cache or S3.
func (o *Objects) load(h plumbing.Hash) (*stored, error) {
	if s, _ := o.cache.get(h); s != nil {
		return s, nil
	}
	key := o.Key(h)
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	out, err := o.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(o.bucket), Key: aws.String(key)})
	if err != nil {
		var nsk *types.NoSuchKey
		if errors.As(err, &nsk) || awserr.Code(err) == "NoSuchKey" {
			return nil, plumbing.ErrObjectNotFound
		}
		return nil, fmt.Errorf("gitstore: get object %s: %w", key, awserr.Safe(err))
	}
	defer out.Body.Close()
	body, err := io.ReadAll(io.LimitReader(out.Body, maxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("gitstore: get object %s: read: %w", key, awserr.Safe(err))
	}
	if len(body) > maxBodyBytes {
		return nil, fmt.Errorf("gitstore: object %s: %w: over %d bytes compressed", key, domain.ErrCorrupt, maxBodyBytes)
	}
	s, err := decode(h, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("gitstore: object %s: %w", key, err)
	}
	o.cache.add(s)
	return s, nil
}

// stored is an object as the cache keeps it; data is never modified.
type stored struct {
	h    plumbing.Hash
	t    plumbing.ObjectType
	data []byte
}

// readOnly is what EncodedObject returns: the cached bytes, shared, behind
// an object that cannot write them.
type readOnly struct {
	s    *stored
	t    plumbing.ObjectType
	size int64
}

func (r *readOnly) Hash() plumbing.Hash           { return r.s.h }
func (r *readOnly) Type() plumbing.ObjectType     { return r.t }
func (r *readOnly) SetType(t plumbing.ObjectType) { r.t = t }
func (r *readOnly) Size() int64                   { return r.size }
func (r *readOnly) SetSize(n int64)               { r.size = n }
func (r *readOnly) Reader() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(r.s.data)), nil
}
func (r *readOnly) Writer() (io.WriteCloser, error) {
	return nil, errors.New("gitstore: a stored object is read-only; write a NewEncodedObject")
}

// encode is git's loose-object format: zlib of "<type> <size>\x00<content>".
func encode(t plumbing.ObjectType, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	if _, err := fmt.Fprintf(zw, "%s %d\x00", t, len(data)); err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// maxBodyBytes bounds a compressed object: zlib adds a few bytes a block
// to what it cannot compress.
const maxBodyBytes = MaxObjectBytes + MaxObjectBytes/64 + 1024

// maxHeader bounds "<type> <size>\x00": "commit " and 20 digits.
const maxHeader = 32

// decode reads a loose object that must hash to h. Errors wrap
// domain.ErrCorrupt and say what is wrong, never what the object holds.
func decode(h plumbing.Hash, body io.Reader) (*stored, error) {
	corrupt := func(why string) error { return fmt.Errorf("%w: %s", domain.ErrCorrupt, why) }
	zr, err := zlib.NewReader(body)
	if err != nil {
		return nil, corrupt("not a zlib stream")
	}
	defer zr.Close()
	br := bufio.NewReaderSize(zr, 4096)
	hdr, err := br.Peek(maxHeader)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, corrupt("unreadable header")
	}
	end := bytes.IndexByte(hdr, 0)
	if end < 0 {
		return nil, corrupt("no object header")
	}
	typ, sizeText, ok := strings.Cut(string(hdr[:end]), " ")
	t, terr := plumbing.ParseObjectType(typ)
	size, serr := strconv.ParseInt(sizeText, 10, 64)
	if !ok || terr != nil || serr != nil || !storable(t) || size < 0 || strconv.FormatInt(size, 10) != sizeText {
		return nil, corrupt("invalid object header")
	}
	if size > MaxObjectBytes {
		return nil, corrupt(fmt.Sprintf("%d bytes, over %d", size, MaxObjectBytes))
	}
	if _, err := br.Discard(end + 1); err != nil {
		return nil, corrupt("unreadable header")
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(br, data); err != nil {
		return nil, corrupt("shorter than its header says")
	}
	if n, err := br.Read(make([]byte, 1)); n > 0 || !errors.Is(err, io.EOF) {
		return nil, corrupt("longer than its header says, or a broken zlib stream")
	}
	if got := plumbing.ComputeHash(t, data); got != h {
		return nil, corrupt("its content hashes to " + got.String())
	}
	return &stored{h: h, t: t, data: data}, nil
}

// isStatus reports whether err is an HTTP answer with status, or an API
// error with code (emulators do not always send both).
func isStatus(err error, status int, code string) bool {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() == status {
		return true
	}
	return awserr.Code(err) == code
}
