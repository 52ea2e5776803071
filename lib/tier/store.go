package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/memblob" // mem:// for tests
	_ "gocloud.dev/blob/s3blob"  // s3://bucket?endpoint=…&region=…
	"gocloud.dev/gcerrors"
)

// Store is a remote object store reached through gocloud.dev/blob:
// file:///path (a directory, created when missing), s3://bucket with
// the query parameters of gocloud's s3blob (endpoint, region,
// use_path_style…; credentials from the environment and the AWS
// credential files only), or mem:// (tests). Its methods may be called
// concurrently.
type Store struct {
	bucket *blob.Bucket
	// url is the URL without its query, for logs: a query may name an
	// endpoint, never a credential, but it stays out of logs anyway.
	url string
}

// ErrNotFound: no object has that key.
var ErrNotFound = errors.New("tier: object not found")

// OpenStore opens the store at rawURL.
func OpenStore(ctx context.Context, rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("tier: store url: %w", err)
	}
	shown := u.Scheme + "://" + u.Host + u.Path
	var b *blob.Bucket
	if u.Scheme == "file" {
		if u.Path == "" || !strings.HasPrefix(u.Path, "/") {
			return nil, fmt.Errorf("tier: store url %s: want file:///absolute/path", shown)
		}
		if err := os.MkdirAll(u.Path, 0o750); err != nil {
			return nil, fmt.Errorf("tier: store %s: %w", shown, err)
		}
		// No .attrs side files: the store holds the objects only.
		b, err = fileblob.OpenBucket(u.Path, &fileblob.Options{Metadata: fileblob.MetadataDontWrite})
	} else {
		b, err = blob.OpenBucket(ctx, rawURL)
	}
	if err != nil {
		return nil, fmt.Errorf("tier: open store %s: %w", shown, err)
	}
	return &Store{bucket: b, url: shown}, nil
}

// String is the store's URL without its query.
func (s *Store) String() string { return s.url }

// ReadRange returns n bytes of the object key from offset off, fewer only
// at the object's end (Ranger).
func (s *Store) ReadRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	r, err := s.bucket.NewRangeReader(ctx, key, off, n, nil)
	if err != nil {
		return nil, s.wrap(key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, s.wrap(key, err)
	}
	return b, nil
}

// ReadAll returns the whole object key.
func (s *Store) ReadAll(ctx context.Context, key string) ([]byte, error) {
	b, err := s.bucket.ReadAll(ctx, key)
	return b, s.wrap(key, err)
}

// Put writes the object key from r.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	w, err := s.bucket.NewWriter(ctx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return s.wrap(key, err)
	}
	if _, err := io.Copy(w, r); err != nil {
		_ = w.Close()
		return s.wrap(key, err)
	}
	return s.wrap(key, w.Close())
}

// Delete removes the object key; an absent one is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	err := s.bucket.Delete(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil
	}
	return s.wrap(key, err)
}

// List returns the keys under prefix.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return keys, nil
		}
		if err != nil {
			return keys, s.wrap(prefix, err)
		}
		if !o.IsDir {
			keys = append(keys, o.Key)
		}
	}
}

// DeletePrefix removes every object under prefix.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) error {
	keys, err := s.List(ctx, prefix)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := s.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the store.
func (s *Store) Close() error { return s.bucket.Close() }

func (s *Store) wrap(key string, err error) error {
	if err == nil {
		return nil
	}
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%w: %s in %s", ErrNotFound, key, s.url)
	}
	return fmt.Errorf("tier: %s in %s: %w", key, s.url, err)
}
