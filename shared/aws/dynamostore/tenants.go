package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
)

// Tenant uploads (domain.TenantStore): one item per upload and one
// revision item, on the store's table (see the package documentation).
// Every write is one TransactWriteItems over the upload and the revision,
// so the revision moves exactly when an upload changes.

var _ domain.TenantStore = (*Store)(nil)

// maxTenantAttempts bounds the transactions one upload write tries while
// other writers hold the revision item (each write transacts on it, so
// concurrent uploads conflict there and all but one are canceled).
const maxTenantAttempts = 10

// tenantPK is the partition key of an upload. Validated tenants, kinds and
// names hold no '#', so the key splits back unambiguously.
func tenantPK(tenant, kind, name string) string {
	return tenantResPrefix + tenant + "#" + kind + "#" + name
}

// splitTenantID splits the part of an upload's key after the prefix into
// tenant, kind and name, and validates them.
func splitTenantID(id string) (tenant, kind, name string, err error) {
	parts := strings.SplitN(id, "#", 3)
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("tenant resource key %.80q: want <tenant>#<kind>#<name>: %w", id, domain.ErrInvalidID)
	}
	return parts[0], parts[1], parts[2], domain.ValidateTenantKey(parts[0], parts[1], parts[2])
}

func tenantItem(r domain.TenantResource) (map[string]types.AttributeValue, error) {
	updated, err := timeText(r.UpdatedAt)
	if err != nil {
		return nil, fmt.Errorf("updatedAt: %w", err)
	}
	return map[string]types.AttributeValue{
		PartitionKey:     str(tenantPK(r.Tenant, r.Kind, r.Name)),
		attrKind:         str(kindTenantResource),
		attrTenant:       str(r.Tenant),
		attrResourceKind: str(r.Kind),
		attrName:         str(r.Name),
		attrSpec:         str(string(r.Spec)),
		attrUpdatedAt:    str(updated),
	}, nil
}

// decodeTenant reads an upload item whose key id (after the prefix) is
// id. Errors wrap ErrCorrupt and never hold the spec.
func decodeTenant(id string, item map[string]types.AttributeValue) (domain.TenantResource, error) {
	var r domain.TenantResource
	if err := checkKind(item, kindTenantResource); err != nil {
		return r, err
	}
	var err error
	for _, f := range []struct {
		name string
		to   *string
	}{{attrTenant, &r.Tenant}, {attrResourceKind, &r.Kind}, {attrName, &r.Name}} {
		if *f.to, err = needS(item, f.name); err != nil {
			return r, err
		}
	}
	if tenantPK(r.Tenant, r.Kind, r.Name) != tenantResPrefix+id {
		return r, fmt.Errorf("%w: attributes %s, %s and %s do not match the key", domain.ErrCorrupt, attrTenant, attrResourceKind, attrName)
	}
	spec, err := needS(item, attrSpec)
	if err != nil {
		return r, err
	}
	r.Spec = []byte(spec)
	if r.UpdatedAt, err = needTime(item, attrUpdatedAt); err != nil {
		return r, err
	}
	if err := r.Validate(); err != nil {
		return r, fmt.Errorf("%w: %w", domain.ErrCorrupt, err)
	}
	return r, nil
}

// PutTenantResource creates or replaces r's item and adds one to the
// revision in one transaction.
func (s *Store) PutTenantResource(ctx context.Context, r domain.TenantResource) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("dynamostore: put tenant resource: %w", err)
	}
	item, err := tenantItem(r)
	if err == nil {
		err = s.writeTenant(ctx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: item}})
	}
	if err != nil {
		return fmt.Errorf("dynamostore: put tenant %s %s %s: %w", r.Tenant, r.Kind, r.Name, err)
	}
	return nil
}

// DeleteTenantResource deletes the upload's item, on condition that it
// exists, and adds one to the revision in one transaction: an absent
// upload cancels both, so the revision stays, and is ErrNotFound.
func (s *Store) DeleteTenantResource(ctx context.Context, tenant, kind, name string) error {
	if err := domain.ValidateTenantKey(tenant, kind, name); err != nil {
		return fmt.Errorf("dynamostore: delete tenant resource: %w", err)
	}
	err := s.writeTenant(ctx, types.TransactWriteItem{Delete: &types.Delete{
		TableName:                aws.String(s.table),
		Key:                      key(tenantPK(tenant, kind, name)),
		ConditionExpression:      aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": PartitionKey},
	}})
	if err != nil {
		return fmt.Errorf("dynamostore: delete tenant %s %s %s: %w", tenant, kind, name, err)
	}
	return nil
}

// writeTenant runs op and the revision increment as one transaction,
// trying again, after a short random wait, while the transaction is
// canceled only because another one holds an item (every upload write
// takes the revision item, so concurrent writes collide there). A failed
// condition on op is ErrNotFound.
func (s *Store) writeTenant(ctx context.Context, op types.TransactWriteItem) error {
	bump := types.TransactWriteItem{Update: &types.Update{
		TableName:                aws.String(s.table),
		Key:                      key(tenantRevisionPK),
		UpdateExpression:         aws.String("SET #kind = :kind ADD #revision :one"),
		ExpressionAttributeNames: map[string]string{"#kind": attrKind, "#revision": attrRevision},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":kind": str(kindTenantRevision), ":one": num(1),
		},
	}}
	for attempt := 1; ; attempt++ {
		// A new input each time: the SDK fills in an idempotency token on
		// the input, which must not carry over to a new transaction.
		_, err := s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: []types.TransactWriteItem{op, bump},
		})
		if err == nil {
			return nil
		}
		reasons, err := s.cancellation(err, 2)
		if err != nil {
			return err
		}
		busy := false
		for i, r := range reasons {
			switch code := aws.ToString(r.Code); {
			case code == "None" || code == "":
			case code == "ConditionalCheckFailed" && i == 0 && op.Delete != nil:
				return domain.ErrNotFound
			case retryableReason(code):
				busy = true
			default:
				return fmt.Errorf("transaction canceled (%s)", reasonCodes(reasons))
			}
		}
		if !busy {
			return fmt.Errorf("transaction canceled (%s)", reasonCodes(reasons))
		}
		if attempt == maxTenantAttempts {
			return fmt.Errorf("other writes kept holding the revision; gave up after %d transactions: %w", attempt, domain.ErrConflict)
		}
		d := time.Duration(attempt)*10*time.Millisecond + rand.N(20*time.Millisecond)
		if err := sleepCtx(ctx, d); err != nil {
			return err
		}
	}
}

// TenantRevision is one strongly consistent GetItem of the revision item,
// so a write that has returned anywhere is seen.
func (s *Store) TenantRevision(ctx context.Context) (int64, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(tenantRevisionPK),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, fmt.Errorf("dynamostore: tenant revision: %w", s.apiError(err))
	}
	if len(out.Item) == 0 {
		return 0, nil
	}
	if err := checkKind(out.Item, kindTenantRevision); err != nil {
		return 0, fmt.Errorf("dynamostore: tenant revision: %w", err)
	}
	rev, err := needN(out.Item, attrRevision)
	if err != nil {
		return 0, fmt.Errorf("dynamostore: tenant revision: %w", err)
	}
	return rev, nil
}

// ListTenantResources scans the table with consistent reads, keeping the
// upload items. A Scan reads (and is billed for) every item of the table,
// grants and sessions too, before the filter drops them: call it when
// TenantRevision has moved, not on every request.
//
// Any item that does not decode fails the listing, with an error naming
// its key and attribute but never its spec: the port has no way to return
// the rest, and silently dropping one tenant's upload would be worse.
func (s *Store) ListTenantResources(ctx context.Context) ([]domain.TenantResource, []error, error) {
	var out []domain.TenantResource
	valid := func(id string) error { _, _, _, err := splitTenantID(id); return err }
	bad, err := s.scanKind(ctx, kindTenantResource, tenantResPrefix, valid, func(id string, item map[string]types.AttributeValue) error {
		r, err := decodeTenant(id, item)
		if err != nil {
			return fmt.Errorf("dynamostore: tenant resource %s: %w", id, err)
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("dynamostore: list tenant resources: %w", err)
	}
	for i, e := range bad {
		if !errors.Is(e, domain.ErrCorrupt) {
			bad[i] = fmt.Errorf("%w: %w", domain.ErrCorrupt, e)
		}
	}
	slices.SortFunc(out, func(a, b domain.TenantResource) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	return out, bad, nil
}
