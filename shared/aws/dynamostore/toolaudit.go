package dynamostore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
)

// The audit stream of tool calls (domain.ToolAuditLog) on the table: one
// item per record, listed by the operator lists' indexes under kind
// "audit" (see the package documentation, "Tool audit").
const (
	kindToolAudit = "ToolAudit"
	auditPrefix   = "audit#"
	listAudit     = "audit"
)

// ToolAuditLog is the audit stream on the store's table, keeping records
// for its retention: DynamoDB's TTL removes them after it, and a query
// never reads past it.
type ToolAuditLog struct {
	s         *Store
	retention time.Duration
}

// ToolAudit is the store's audit stream, keeping records for retention
// (≤ 0: domain.DefaultToolAuditRetention).
func (s *Store) ToolAudit(retention time.Duration) *ToolAuditLog {
	if retention <= 0 {
		retention = domain.DefaultToolAuditRetention
	}
	return &ToolAuditLog{s: s, retention: retention}
}

// WithRetention is the same stream keeping records for d.
func (a *ToolAuditLog) WithRetention(d time.Duration) domain.ToolAuditLog {
	return a.s.ToolAudit(d)
}

// AppendToolAudit puts r as a new item audit#<list key>: its list key is
// domain.ListKey of r.At and a random id, so the item's key sorts newest
// first too and two records never share an item.
func (a *ToolAuditLog) AppendToolAudit(ctx context.Context, r domain.ToolAudit) error {
	if r.At.IsZero() {
		return fmt.Errorf("dynamostore: append tool audit: %w: the record has no time", domain.ErrInvalidID)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("dynamostore: append tool audit: %w", err)
	}
	r.At = r.At.UTC()
	lk := domain.ListKey(r.At, hex.EncodeToString(b[:]))
	doc, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("dynamostore: append tool audit: %w", err)
	}
	item := map[string]types.AttributeValue{
		PartitionKey: str(auditPrefix + lk),
		attrKind:     str(kindToolAudit),
		attrDoc:      str(string(doc)),
		attrListKey:  str(listAudit + listTenant + r.Tenant),
		attrListAll:  str(listAudit),
		attrListSort: str(lk),
		TTLAttribute: num(epochCeil(r.At.Add(a.retention))),
	}
	_, err = a.s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(a.s.table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": PartitionKey},
	})
	if err != nil {
		return fmt.Errorf("dynamostore: append tool audit: %w", a.s.apiError(err))
	}
	return nil
}

// QueryToolAudit reads one page of the scope's records, newest first,
// from the tenant's partition of ListIndex (ListAllIndex for every
// tenant), down to the retention (a sort key bound: expired items DynamoDB
// has not removed yet are not read). Tool and Status are checked on the
// items read.
func (a *ToolAuditLog) QueryToolAudit(ctx context.Context, q domain.ToolAuditQuery) (domain.ToolAuditPage, error) {
	limit, err := domain.PageLimit(q.Limit)
	if err != nil {
		return domain.ToolAuditPage{}, fmt.Errorf("dynamostore: query tool audit: %w", err)
	}
	if q.After != "" {
		if _, _, err := domain.ParseListKey(q.After); err != nil {
			return domain.ToolAuditPage{}, fmt.Errorf("dynamostore: query tool audit: %w", err)
		}
	}
	cutoff := a.s.now().Add(-a.retention)
	r := scopeRange(listAudit, q.Tenant, q.AnyTenant, "", domain.ListKeySince(cutoff))
	var page domain.ToolAuditPage
	next, err := a.s.listPage(ctx, []listRange{r}, q.After, limit, q.Tool != "" || q.Status != "", func(pk string, item map[string]types.AttributeValue) bool {
		if item == nil {
			return false // removed by TTL since the index listed it
		}
		rec, err := decodeToolAudit(item)
		if err != nil {
			page.Unreadable = append(page.Unreadable, fmt.Errorf("dynamostore: tool audit %.80s: %w", strings.TrimPrefix(pk, auditPrefix), err))
			return false
		}
		// The item decides, as in the other lists.
		ok := (q.AnyTenant || rec.Tenant == q.Tenant) && (q.Tool == "" || rec.Tool == q.Tool) &&
			(q.Status == "" || rec.Status == q.Status) && !rec.At.Before(cutoff)
		if ok {
			page.Records = append(page.Records, rec)
		}
		return ok
	})
	if err != nil {
		return domain.ToolAuditPage{}, fmt.Errorf("dynamostore: query tool audit: %w", err)
	}
	page.Next = next
	return page, nil
}

func decodeToolAudit(item map[string]types.AttributeValue) (domain.ToolAudit, error) {
	if err := checkKind(item, kindToolAudit); err != nil {
		return domain.ToolAudit{}, err
	}
	doc, err := needS(item, attrDoc)
	if err != nil {
		return domain.ToolAudit{}, err
	}
	var r domain.ToolAudit
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		return domain.ToolAudit{}, fmt.Errorf("%w: attribute %s: %s", domain.ErrCorrupt, attrDoc, domain.JSONErrorWithoutContent(err))
	}
	if r.At.IsZero() {
		return domain.ToolAudit{}, fmt.Errorf("%w: attribute %s: no time", domain.ErrCorrupt, attrDoc)
	}
	return r, nil
}

var _ domain.ToolAuditLog = (*ToolAuditLog)(nil)
