// Package awssecrets resolves the bundle's secretRef ValueSources and the
// state-signing keys from AWS Secrets Manager at cold start.
//
// A bundle reference {secretRef: {ref: Secret/<name>, key: <key>}} reads the
// secret "<prefix><name>", whose SecretString is a JSON object, and takes
// its member <key>. It must never log, cache on disk or put into an error a
// secret value; errors name the secret and key, and an AWS error only as
// awserr describes it.
package awssecrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/agentauth/agentauth/shared/aws/awserr"
	"github.com/agentauth/agentauth/shared/domain"
)

// API is what the resolver needs from Secrets Manager.
type API interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Resolver implements bundle.SecretResolver on Secrets Manager. Each
// secret is fetched once per process (cold start).
type Resolver struct {
	api     API
	prefix  string
	timeout time.Duration

	mu    sync.Mutex
	cache map[string]map[string]string
}

// New returns a resolver reading secrets named prefix+<name>.
func New(api API, prefix string) *Resolver {
	return &Resolver{api: api, prefix: prefix, timeout: 10 * time.Second, cache: map[string]map[string]string{}}
}

// ResolveSecret returns member key of secret Secret/<name>.
func (r *Resolver) ResolveSecret(name, key string) (domain.Secret, error) {
	id := r.prefix + name
	members, err := r.members(id)
	if err != nil {
		return domain.Secret{}, err
	}
	v, ok := members[key]
	if !ok || v == "" {
		return domain.Secret{}, fmt.Errorf("secret %s has no key %q: %w", id, key, domain.ErrNotFound)
	}
	return domain.NewSecret(v), nil
}

func (r *Resolver) members(id string) (map[string]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.cache[id]; ok {
		return m, nil
	}
	s, err := r.fetch(id)
	if err != nil {
		return nil, err
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("secret %s: SecretString must be a JSON object of strings", id)
	}
	r.cache[id] = m
	return m, nil
}

// String returns the whole SecretString of secret id (e.g. the state keys).
func (r *Resolver) String(id string) (domain.Secret, error) {
	s, err := r.fetch(id)
	if err != nil {
		return domain.Secret{}, err
	}
	return domain.NewSecret(s), nil
}

func (r *Resolver) fetch(id string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	out, err := r.api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
	var nf *smtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		return "", fmt.Errorf("secret %s does not exist: %w", id, domain.ErrNotFound)
	case err != nil:
		return "", fmt.Errorf("read secret %s: %w", id, awserr.Safe(err))
	case out.SecretString == nil:
		return "", fmt.Errorf("secret %s has no SecretString", id)
	}
	return *out.SecretString, nil
}
