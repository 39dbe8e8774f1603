package jwtauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	maxJWKSBytes  = 1 << 20
	maxJWKSKeys   = 100
	minRSAKeyBits = 2048
)

// keyCache holds the issuer's public signing keys. Fetches happen lazily,
// one at a time, and no more often than once per refetch interval whatever
// their outcome, so neither unknown key ids nor a failing endpoint can turn
// token traffic into JWKS traffic.
type keyCache struct {
	url      string
	client   *http.Client
	now      func() time.Time
	interval time.Duration
	ttl      time.Duration

	fetching chan struct{} // one-slot semaphore held while fetching

	mu        sync.RWMutex
	keys      []jose.JSONWebKey
	fetchedAt time.Time // last successful fetch
	triedAt   time.Time // last attempt, successful or not
	lastErr   error
}

func newKeyCache(cfg Config) *keyCache {
	return &keyCache{
		url:      cfg.JWKSURL,
		client:   cfg.HTTPClient,
		now:      cfg.Now,
		interval: cfg.RefetchInterval,
		ttl:      cfg.CacheTTL,
		fetching: make(chan struct{}, 1),
	}
}

// lookup returns the keys named kid (every key when kid is empty). It
// fetches when nothing is cached or the cache is older than the TTL, and
// refetches when no key matches, subject to the refetch interval.
func (c *keyCache) lookup(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	c.mu.RLock()
	keys, fetchedAt := c.keys, c.fetchedAt
	c.mu.RUnlock()
	fresh := !fetchedAt.IsZero() && c.now().Sub(fetchedAt) < c.ttl
	if fresh {
		if found := matchKid(keys, kid); len(found) > 0 {
			return found, nil
		}
	}
	keys, err := c.refresh(ctx)
	if err != nil {
		return nil, err
	}
	if found := matchKid(keys, kid); len(found) > 0 {
		return found, nil
	}
	return nil, reject(ReasonUnknownKey)
}

// refresh fetches the key set unless an attempt was made within the refetch
// interval, in which case it returns what is cached (or the last failure if
// nothing is).
func (c *keyCache) refresh(ctx context.Context) ([]jose.JSONWebKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, &Error{Reason: ReasonJWKSUnavailable, err: err}
	}
	select {
	case c.fetching <- struct{}{}:
		defer func() { <-c.fetching }()
	case <-ctx.Done():
		return nil, &Error{Reason: ReasonJWKSUnavailable, err: ctx.Err()}
	}

	c.mu.RLock()
	keys, triedAt, fetchedAt, lastErr := c.keys, c.triedAt, c.fetchedAt, c.lastErr
	c.mu.RUnlock()
	now := c.now()
	if !triedAt.IsZero() && now.Sub(triedAt) < c.interval {
		// Someone fetched (or failed to) a moment ago: do not ask again.
		if fetchedAt.IsZero() || now.Sub(fetchedAt) >= c.ttl {
			if lastErr == nil {
				lastErr = errors.New("key set expired")
			}
			return nil, &Error{Reason: ReasonJWKSUnavailable, err: lastErr}
		}
		return keys, nil
	}

	// The fetch outlives the caller's cancellation: a caller that hangs up
	// must not leave a failed attempt behind that blocks fetching for
	// everyone until the interval passes.
	fetchCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultFetchTimeout)
	fetched, err := c.fetch(fetchCtx)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.triedAt = now
	if err != nil {
		// Fail closed: a key set that cannot be refreshed after its TTL is
		// not used, so a removed key stops working.
		c.lastErr = err
		if c.fetchedAt.IsZero() || now.Sub(c.fetchedAt) >= c.ttl {
			return nil, &Error{Reason: ReasonJWKSUnavailable, err: err}
		}
		return c.keys, nil
	}
	c.keys, c.fetchedAt, c.lastErr = fetched, now, nil
	return fetched, nil
}

func (c *keyCache) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, fmt.Errorf("build JWKS request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch JWKS: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read JWKS: %w", err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("read JWKS: larger than %d bytes", maxJWKSBytes)
	}
	return parseJWKS(body)
}

// parseJWKS keeps the usable public signing keys and skips the rest, so one
// key of a type we do not know does not take the whole set down.
func parseJWKS(body []byte) ([]jose.JSONWebKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, errors.New("decode JWKS: not a JSON key set")
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub, ok := publicKey(k.Key)
		if !ok {
			continue
		}
		k.Key = pub
		keys = append(keys, k)
		if len(keys) == maxJWKSKeys {
			break
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("decode JWKS: no usable signing keys")
	}
	return keys, nil
}

// publicKey returns the public half of an asymmetric key. Symmetric keys
// are dropped here, a second guard (after the algorithm allow list) against
// HMAC-with-a-public-key confusion.
func publicKey(key any) (any, bool) {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return k, k.N != nil && k.N.BitLen() >= minRSAKeyBits
	case *rsa.PrivateKey:
		return publicKey(&k.PublicKey)
	case *ecdsa.PublicKey:
		return k, true
	case *ecdsa.PrivateKey:
		return &k.PublicKey, true
	case ed25519.PublicKey:
		return k, len(k) == ed25519.PublicKeySize
	case ed25519.PrivateKey:
		return k.Public(), true
	default:
		return nil, false
	}
}

func matchKid(keys []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	if kid == "" {
		return keys
	}
	var out []jose.JSONWebKey
	for _, k := range keys {
		if k.KeyID == kid {
			out = append(out, k)
		}
	}
	return out
}

// keyFits reports whether k may verify a signature made with alg: the key's
// own alg, when it declares one, must be alg, and the key type (and curve)
// must be the one alg is defined for.
func keyFits(k jose.JSONWebKey, alg string) bool {
	if k.Algorithm != "" && k.Algorithm != alg {
		return false
	}
	switch key := k.Key.(type) {
	case *rsa.PublicKey:
		switch alg {
		case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
			return true
		}
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return key.Curve == elliptic.P256()
		case "ES384":
			return key.Curve == elliptic.P384()
		case "ES512":
			return key.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}
