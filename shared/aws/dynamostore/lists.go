package dynamostore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn"
)

// The operator lists (domain.OperatorQueries, turn.InstanceQuerier): two
// sparse global secondary indexes, keys only, over the grant, session and
// instance items, read with Query and followed by a BatchGetItem of the
// page; never a Scan. See the package documentation ("List indexes").

// List index values. They are the stored format: never change one.
const (
	listGrant    = "grant"
	listSession  = "session"
	listInstance = "turninst"
	// listTenant separates a kind from the tenant in [ListKeyAttribute].
	listTenant = "#t#"
	// A grant's [ListSortAttribute] starts with its state, so that a
	// Query reads the active or the revoked ones alone.
	listActive  = "a#"
	listRevoked = "r#"
	// listFailing holds the grants not revoked whose last refreshes
	// failed: a failing grant moves here from listActive (one index
	// write when it starts failing, one when a refresh succeeds again).
	listFailing = "f#"
	// listEnd follows every character of a list key.
	listEnd = "~"
	// listExamineBound bounds the records a page examines when it filters
	// on what no index keys: such a page ends early with a Next.
	listExamineBound = 500
)

// grantListAttrs put g in both list indexes. They follow from the tenant,
// the revoked flag, whether its refreshes are failing, the creation time
// and the id alone, so a refresh (a PutGrant that keeps them) writes
// neither index: a keys-only index is written only when one of its key
// attributes changes.
func grantListAttrs(g domain.Grant) map[string]types.AttributeValue {
	state := listActive
	switch {
	case g.Revoked:
		state = listRevoked
	case g.RefreshFailures > 0:
		state = listFailing
	}
	return map[string]types.AttributeValue{
		attrListKey:  str(listGrant + listTenant + g.Tenant),
		attrListAll:  str(listGrant),
		attrListSort: str(state + domain.ListKey(g.CreatedAt, g.ID)),
	}
}

// sessionListAttrs put sess in both list indexes; no write after its
// creation changes them.
func sessionListAttrs(sess domain.Session) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrListKey:  str(listSession + listTenant + sess.Tenant),
		attrListAll:  str(listSession),
		attrListSort: str(domain.ListKey(sess.CreatedAt, sess.ID)),
	}
}

// instanceListAttrs put an instance item (key hash h) in both list
// indexes, by swarm, and carry the instance record on its own so that a
// list reads it without the doc (which may be in S3).
func instanceListAttrs(h string, in turn.Instance) (map[string]types.AttributeValue, error) {
	rec, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode instance record: %w", err)
	}
	return map[string]types.AttributeValue{
		attrListKey:  str(listInstance + "#" + in.Key.Swarm),
		attrListAll:  str(listInstance),
		attrListSort: str(domain.ListKey(in.CreatedAt, h)),
		attrInstance: str(string(rec)),
	}, nil
}

// listRange is the part of one list index partition a query reads: the
// sort keys prefix+k for k before end.
type listRange struct {
	index, keyAttr, key string
	prefix              string
	end                 string // exclusive bound of k ("": none)
}

// listed is one index entry: the item's key and its list key (the sort
// key without the range's prefix).
type listed struct{ pk, k string }

// scopeRange is the range of a kind's records in a tenant's scope, or in
// every tenant's.
func scopeRange(kind, tenant string, anyTenant bool, prefix, end string) listRange {
	if anyTenant {
		return listRange{index: ListAllIndex, keyAttr: attrListAll, key: kind, prefix: prefix, end: end}
	}
	return listRange{index: ListIndex, keyAttr: attrListKey, key: kind + listTenant + tenant, prefix: prefix, end: end}
}

// rangeKeys reads up to n entries of r after the list key after ("": from
// the start), in order, and whether more may follow.
func (s *Store) rangeKeys(ctx context.Context, r listRange, after string, n int) ([]listed, bool, error) {
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		IndexName:                aws.String(r.index),
		KeyConditionExpression:   aws.String("#k = :k AND #s BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{"#k": r.keyAttr, "#s": attrListSort},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":k": str(r.key), ":lo": str(r.prefix + after), ":hi": str(r.prefix + cmp.Or(r.end, listEnd)),
		},
	}
	if r.prefix+after == "" {
		// A key condition's value may not be empty.
		in.KeyConditionExpression = aws.String("#k = :k AND #s <= :hi")
		delete(in.ExpressionAttributeValues, ":lo")
	}
	var out []listed
	for {
		limit := int32(n - len(out) + 1) // one more: the entry at after itself
		if s.scanLimit > 0 {
			limit = min(limit, s.scanLimit)
		}
		in.Limit = aws.Int32(limit)
		res, err := s.api.Query(ctx, in)
		if err != nil {
			return nil, false, s.apiError(err)
		}
		for _, item := range res.Items {
			pk, _ := getPK(item)
			sk, _, _ := getS(item, attrListSort)
			k, ok := strings.CutPrefix(sk, r.prefix)
			if !ok || k == after {
				continue
			}
			if len(out) == n {
				return out, true, nil
			}
			out = append(out, listed{pk: pk, k: k})
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, false, nil
		}
		if len(out) == n {
			return out, true, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// mergedKeys reads up to n entries of the ranges after after, merged in
// list key order: of a range that has more, only entries up to its last
// one read are certain to be in order, so the merge stops there.
func (s *Store) mergedKeys(ctx context.Context, ranges []listRange, after string, n int) ([]listed, bool, error) {
	var all []listed
	more, bound := false, ""
	for _, r := range ranges {
		keys, m, err := s.rangeKeys(ctx, r, after, n)
		if err != nil {
			return nil, false, err
		}
		all = append(all, keys...)
		if m && len(keys) > 0 {
			if last := keys[len(keys)-1].k; bound == "" || last < bound {
				bound = last
			}
		}
		more = more || m
	}
	slices.SortFunc(all, func(a, b listed) int { return cmp.Or(strings.Compare(a.k, b.k), strings.Compare(a.pk, b.pk)) })
	if bound != "" {
		all = slices.DeleteFunc(all, func(l listed) bool { return l.k > bound })
	}
	if len(all) > n {
		all, more = all[:n], true
	}
	return all, more, nil
}

// listPage fills a page of up to limit records from ranges after after:
// it reads entries, then the items they name with BatchGetItem
// (consistent), and passes each item (nil when it is gone) to take, which
// keeps or skips it. With filtered (take skips what the index does not
// key) it reads a full batch each round and stops after
// listExamineBound entries. It returns the page's Next.
func (s *Store) listPage(ctx context.Context, ranges []listRange, after string, limit int, filtered bool,
	take func(pk string, item map[string]types.AttributeValue) bool) (string, error) {
	got, examined, cursor := 0, 0, after
	seen := map[string]bool{}
	for {
		n := limit - got
		if filtered {
			n = maxBatchGet
		}
		keys, more, err := s.mergedKeys(ctx, ranges, cursor, n)
		if err != nil {
			return "", err
		}
		pks := make([]string, 0, len(keys))
		for _, k := range keys {
			if !slices.Contains(pks, k.pk) {
				pks = append(pks, k.pk)
			}
		}
		items, err := s.batchGet(ctx, pks)
		if err != nil {
			return "", err
		}
		for i, k := range keys {
			cursor = k.k
			examined++
			if !seen[k.pk] && take(k.pk, items[k.pk]) {
				got++
			}
			seen[k.pk] = true
			if got == limit {
				if i < len(keys)-1 || more {
					return cursor, nil
				}
				return "", nil
			}
		}
		if !more {
			return "", nil
		}
		if examined >= listExamineBound {
			return cursor, nil
		}
	}
}

// QueryGrants reads one page of grants from the tenant's partition of
// ListIndex (ListAllIndex for every tenant): the active or revoked range
// of it, or both merged, newest first. App and Subject are checked on
// the items read.
func (s *Store) QueryGrants(ctx context.Context, q domain.GrantQuery) (domain.GrantPage, error) {
	limit, err := domain.PageLimit(q.Limit)
	if err != nil {
		return domain.GrantPage{}, fmt.Errorf("dynamostore: query grants: %w", err)
	}
	if q.After != "" {
		if _, _, err := domain.ParseListKey(q.After); err != nil {
			return domain.GrantPage{}, fmt.Errorf("dynamostore: query grants: %w", err)
		}
	}
	var ranges []listRange
	if q.Revoked == nil || !*q.Revoked {
		ranges = append(ranges, scopeRange(listGrant, q.Tenant, q.AnyTenant, listActive, ""),
			scopeRange(listGrant, q.Tenant, q.AnyTenant, listFailing, ""))
	}
	if q.Revoked == nil || *q.Revoked {
		ranges = append(ranges, scopeRange(listGrant, q.Tenant, q.AnyTenant, listRevoked, ""))
	}
	var page domain.GrantPage
	next, err := s.listPage(ctx, ranges, q.After, limit, q.App != "" || q.Subject != "", func(pk string, item map[string]types.AttributeValue) bool {
		if item == nil {
			return false // deleted since the index listed it
		}
		id := strings.TrimPrefix(pk, grantPrefix)
		g, err := decodeGrant(id, item)
		if err == nil {
			err = domain.ValidateGrantID(id)
		}
		if err != nil {
			page.Unreadable = append(page.Unreadable, fmt.Errorf("dynamostore: grant %.80s: %w", id, err))
			return false
		}
		// The index may lag the item: the item decides.
		ok := (q.AnyTenant || g.Tenant == q.Tenant) && (q.Revoked == nil || g.Revoked == *q.Revoked) &&
			(q.App == "" || g.OAuthAppRef.Name == q.App) && (q.Subject == "" || g.Subject == q.Subject)
		if ok {
			page.Grants = append(page.Grants, g)
		}
		return ok
	})
	if err != nil {
		return domain.GrantPage{}, fmt.Errorf("dynamostore: query grants: %w", err)
	}
	page.Next = next
	return page, nil
}

// QuerySessions reads one page of sessions from the tenant's partition of
// ListIndex (ListAllIndex for every tenant), newest first, down to Since
// (a sort key bound). App, Status and Reason are checked on the items
// read.
func (s *Store) QuerySessions(ctx context.Context, q domain.SessionQuery) (domain.SessionPage, error) {
	limit, err := domain.PageLimit(q.Limit)
	if err != nil {
		return domain.SessionPage{}, fmt.Errorf("dynamostore: query sessions: %w", err)
	}
	if q.After != "" {
		if _, _, err := domain.ParseListKey(q.After); err != nil {
			return domain.SessionPage{}, fmt.Errorf("dynamostore: query sessions: %w", err)
		}
	}
	end := ""
	if !q.Since.IsZero() {
		end = domain.ListKeySince(q.Since)
	}
	r := scopeRange(listSession, q.Tenant, q.AnyTenant, "", end)
	var page domain.SessionPage
	filtered := q.App != "" || q.Status != "" || q.Reason != ""
	next, err := s.listPage(ctx, []listRange{r}, q.After, limit, filtered, func(pk string, item map[string]types.AttributeValue) bool {
		if item == nil {
			return false
		}
		id := strings.TrimPrefix(pk, sessionPrefix)
		sess, _, err := decodeSession(id, item)
		if err == nil {
			err = domain.ValidateSessionID(id)
		}
		if err != nil {
			page.Unreadable = append(page.Unreadable, fmt.Errorf("dynamostore: session %.80s: %w", id, err))
			return false
		}
		ok := (q.AnyTenant || sess.Tenant == q.Tenant) && (q.App == "" || sess.OAuthAppRef.Name == q.App) &&
			(q.Status == "" || sess.Status == q.Status) && (q.Reason == "" || sess.StatusReason == q.Reason) &&
			!sess.CreatedAt.Before(q.Since)
		if ok {
			page.Sessions = append(page.Sessions, sess)
		}
		return ok
	})
	if err != nil {
		return domain.SessionPage{}, fmt.Errorf("dynamostore: query sessions: %w", err)
	}
	page.Next = next
	return page, nil
}

// CountGrants counts the entries of the scope's active (and failing) and
// revoked ranges with Select COUNT queries, up to limit+1 entries each: what it
// costs follows limit, not the store. The index follows the table within
// about a second.
func (s *Store) CountGrants(ctx context.Context, tenant string, anyTenant bool, limit int) (active, revoked int, capped bool, err error) {
	if limit < 1 {
		return 0, 0, false, fmt.Errorf("dynamostore: count grants: %w: limit %d", domain.ErrInvalidID, limit)
	}
	// Failing grants are active ones: their range is counted only up to
	// what the active range leaves of limit+1.
	var n [3]int
	for i, st := range [...]string{listActive, listFailing, listRevoked} {
		lim := limit
		if i == 1 {
			if n[0] > limit {
				continue // capped already
			}
			lim = limit - n[0]
		}
		if n[i], err = s.countRange(ctx, tenant, anyTenant, st, lim); err != nil {
			return 0, 0, false, fmt.Errorf("dynamostore: count grants: %w", err)
		}
	}
	active, revoked = n[0]+n[1], n[2]
	if active > limit {
		active, capped = limit, true
	}
	if revoked > limit {
		revoked, capped = limit, true
	}
	return active, revoked, capped, nil
}

// CountFailingGrants counts the scope's failing range, up to limit.
func (s *Store) CountFailingGrants(ctx context.Context, tenant string, anyTenant bool, limit int) (int, bool, error) {
	if limit < 1 {
		return 0, false, fmt.Errorf("dynamostore: count failing grants: %w: limit %d", domain.ErrInvalidID, limit)
	}
	n, err := s.countRange(ctx, tenant, anyTenant, listFailing, limit)
	if err != nil {
		return 0, false, fmt.Errorf("dynamostore: count failing grants: %w", err)
	}
	if n > limit {
		return limit, true, nil
	}
	return n, false, nil
}

// countRange counts the entries of one range of the scope, up to
// limit+1, with Select COUNT queries: what it costs follows limit, not
// the store.
func (s *Store) countRange(ctx context.Context, tenant string, anyTenant bool, prefix string, limit int) (int, error) {
	r := scopeRange(listGrant, tenant, anyTenant, prefix, "")
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		IndexName:                aws.String(r.index),
		Select:                   types.SelectCount,
		KeyConditionExpression:   aws.String("#k = :k AND #s BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{"#k": r.keyAttr, "#s": attrListSort},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":k": str(r.key), ":lo": str(prefix), ":hi": str(prefix + listEnd),
		},
	}
	n := 0
	for n <= limit {
		in.Limit = aws.Int32(int32(limit + 1 - n))
		res, err := s.api.Query(ctx, in)
		if err != nil {
			return 0, s.apiError(err)
		}
		n += int(res.Count)
		if len(res.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
	return n, nil
}

// QueryInstances reads one page of instances from the swarm's partition
// of ListIndex (ListAllIndex for every swarm), most recently created
// first (then by key hash), and the instance record each item carries on
// its own (the doc for an item written before it did). Agent and Status
// are checked on the items read.
func (t turnStore) QueryInstances(ctx context.Context, q turn.InstanceQuery) (turn.InstancePage, error) {
	limit, err := domain.PageLimit(q.Limit)
	if err != nil {
		return turn.InstancePage{}, fmt.Errorf("dynamostore: query instances: %w", err)
	}
	if q.After != "" {
		if _, _, err := domain.ParseListKey(q.After); err != nil {
			return turn.InstancePage{}, fmt.Errorf("dynamostore: query instances: %w", err)
		}
	}
	r := listRange{index: ListAllIndex, keyAttr: attrListAll, key: listInstance}
	if q.Swarm != "" {
		r = listRange{index: ListIndex, keyAttr: attrListKey, key: listInstance + "#" + q.Swarm}
	}
	var page turn.InstancePage
	next, err := t.s.listPage(ctx, []listRange{r}, q.After, limit, q.Agent != "" || q.Status != "", func(pk string, item map[string]types.AttributeValue) bool {
		if item == nil {
			return false
		}
		h := strings.TrimPrefix(pk, turnInstPrefix)
		in, err := t.listedInstance(ctx, h, item)
		if err != nil {
			id := h[:min(12, len(h))]
			page.Unreadable = append(page.Unreadable, turn.Unreadable{ID: id, Reason: unreadableReason(err),
				Err: fmt.Errorf("dynamostore: query instances: instance %s: %w", id, err)})
			return false
		}
		ok := (q.Swarm == "" || in.Key.Swarm == q.Swarm) && (q.Agent == "" || in.Key.Agent == q.Agent) &&
			(q.Status == "" || in.Status == q.Status)
		if ok {
			page.Instances = append(page.Instances, in)
		}
		return ok
	})
	if err != nil {
		return turn.InstancePage{}, fmt.Errorf("dynamostore: query instances: %w", err)
	}
	page.Next = next
	return page, nil
}

// listedInstance is the instance record of an instance item: its
// instance attribute, or its doc when it has none.
func (t turnStore) listedInstance(ctx context.Context, h string, item map[string]types.AttributeValue) (turn.Instance, error) {
	if err := checkKind(item, kindTurnInstance); err != nil {
		return turn.Instance{}, err
	}
	rec, ok, err := getS(item, attrInstance)
	if err != nil {
		return turn.Instance{}, err
	}
	if ok {
		var in turn.Instance
		if err := json.Unmarshal([]byte(rec), &in); err != nil {
			return turn.Instance{}, fmt.Errorf("%w: attribute %s: %s", domain.ErrCorrupt, attrInstance, domain.JSONErrorWithoutContent(err))
		}
		return in, nil
	}
	var d instDoc
	if err := t.decodeDoc(ctx, item, kindTurnInstance, instBlobPrefix(h, item), &d); err != nil {
		return turn.Instance{}, err
	}
	return d.Instance, nil
}

var (
	_ domain.OperatorQueries = (*Store)(nil)
	_ turn.InstanceQuerier   = turnStore{}
)
