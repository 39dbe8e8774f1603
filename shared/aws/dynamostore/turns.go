package dynamostore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
)

// Turn items: see the package documentation ("Turn store").
const (
	attrEpoch = "epoch"

	kindTurnInstance = "TurnInstance"
	kindTurnBase     = "TurnBase"
	kindTurnMessage  = "TurnMessage"
	kindTurnEvent    = "TurnEvent"
	kindTurnRecord   = "TurnRecord"

	turnInstPrefix = "turninst#"
	turnBasePrefix = "turnbase#"
	turnMsgPrefix  = "turnmsg#"
	turnLogPrefix  = "turnlog#"
	turnRecPrefix  = "turnrec#"

	// maxTurnTxItems bounds the items of one Commit's transaction, far
	// below DynamoDB's 100: the instance item, the base item of a rebase,
	// and one item per message and turn event.
	maxTurnTxItems = 50
	// maxTurnItemBytes bounds the doc of one turn item kept in the table,
	// far below DynamoDB's 400 KB item limit: with Blobs, larger docs go
	// to S3 (BlobThreshold); without, a commit holding one is refused.
	maxTurnItemBytes = 300 << 10
	// attrBlob names the S3 object that holds an item's doc instead.
	attrBlob = "blob"
	// maxBatchGet is BatchGetItem's key limit per request.
	maxBatchGet = 100
)

// BlobThreshold: a turn item whose doc is over this many bytes keeps it in
// S3 (when the store has Blobs), so that items stay small — a write costs
// one unit per KB, twice in a transaction — and far below DynamoDB's
// 400 KB item limit whatever a model or a tool returns.
const BlobThreshold = 32 << 10

// Blobs keeps the docs of large turn items (shared/aws/s3blobs.Store).
// Keys are "turns/<instance hash>/<epoch>/<sha256 of the doc>": content-
// addressed, so a retried commit writes the same object again.
type Blobs interface {
	Put(ctx context.Context, key string, data []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	DeletePrefix(ctx context.Context, prefix string) error
}

// ErrTurnCommitTooLarge: a commit does not fit one transaction, or one of
// its items would be too large for DynamoDB.
var ErrTurnCommitTooLarge = errors.New("turn commit too large for one DynamoDB transaction")

// instDoc is the instance item's doc: the small state of an instance, and
// the names of the items that hold the rest. Gen numbers the base: every
// rebase writes a new base item and starts a new series of message items,
// so a rebase never has to delete inside its transaction.
type instDoc struct {
	Instance turn.Instance `json:"instance"`
	// Turns are the instance's turns that have not ended; an ended turn
	// is an item of its own (turnrec, written in the commit that ends
	// it), named in Ended, so the instance item — rewritten by every
	// commit — does not grow with the kept turns.
	Turns map[string]turn.Turn `json:"turns"`
	// Ended are the kept ended turns' ids, oldest first (an instance runs
	// one turn at a time, so they end in the order they started).
	Ended     []string             `json:"ended,omitempty"`
	Calls     map[string]turn.Call `json:"calls"`
	Backlog   []domain.Event       `json:"backlog"`
	Processed []string             `json:"processed"`
	// Epoch is random, drawn when the instance is created: the names of
	// its other items start with it, so an instance deleted and created
	// again never shares an item with the old one (whose removal may
	// still be running).
	Epoch    string `json:"epoch"`
	Gen      int64  `json:"gen"`
	HasBase  bool   `json:"hasBase,omitempty"`
	Messages int    `json:"messages"`
	// TurnEvents counts the stored events of each kept turn.
	TurnEvents map[string]int `json:"turnEvents"`
}

// turnHash is the instance's partition name: a hash, so any valid key
// fits DynamoDB's key size and no key part can forge another's item.
func turnHash(k turn.InstanceKey) string {
	h := sha256.Sum256([]byte(k.String()))
	return hex.EncodeToString(h[:])
}

func turnInstPK(h string) string { return turnInstPrefix + h }

// itemsKey is what the names of an instance's other items start with.
func itemsKey(h string, d instDoc) string { return h + "#" + d.Epoch }

func newEpoch() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("dynamostore: instance epoch: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func turnBasePK(h string, gen int64) string {
	return turnBasePrefix + h + "#" + strconv.FormatInt(gen, 10)
}

func turnMsgPK(h string, gen int64, i int) string {
	return turnMsgPrefix + h + "#" + strconv.FormatInt(gen, 10) + "#" + strconv.Itoa(i)
}

// turnRecPK names an ended turn's item.
func turnRecPK(h, turnID string) string {
	t := sha256.Sum256([]byte(turnID))
	return turnRecPrefix + h + "#" + hex.EncodeToString(t[:16])
}

// turnLogPK names the i-th event of a turn; the turn id is hashed, so it
// may hold any character.
func turnLogPK(h, turnID string, i int) string {
	t := sha256.Sum256([]byte(turnID))
	return turnLogPrefix + h + "#" + hex.EncodeToString(t[:16]) + "#" + strconv.Itoa(i)
}

// blobPrefix is where the blobs of an instance incarnation live: h is the
// instance hash, epoch its epoch (so Delete removes exactly them).
func blobPrefix(h, epoch string) string { return "turns/" + h + "/" + epoch + "/" }

// instBlobPrefix is the blob prefix of h's instance item, by the epoch
// attribute it carries beside its doc (which may itself be a blob); ""
// when it has none, and no blob lies under "".
func instBlobPrefix(h string, item map[string]types.AttributeValue) string {
	e, ok := item[attrEpoch].(*types.AttributeValueMemberS)
	if !ok || e.Value == "" {
		return ""
	}
	return blobPrefix(h, e.Value)
}

// blobUnder reports whether key names a blob of the incarnation whose
// prefix is under: under, then a SHA-256 in lowercase hex, and nothing
// else — what docItem writes.
func blobUnder(key, under string) bool {
	name, ok := strings.CutPrefix(key, under)
	if under == "" || !ok || len(name) != sha256.Size*2 {
		return false
	}
	for _, c := range []byte(name) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// docItem is a turn item holding v as JSON in doc — or, over
// BlobThreshold with Blobs, in the S3 object the item names (written
// first: a crash before the transaction leaves an object no item names,
// which Delete of the instance removes).
func (t turnStore) docItem(ctx context.Context, prefix, pk, kind string, v any) (map[string]types.AttributeValue, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("dynamostore: encoding %s: %w", kind, err)
	}
	if t.blobs != nil && len(b) > BlobThreshold {
		key := prefix + sha256Hex(b)
		if err := t.blobs.Put(ctx, key, b); err != nil {
			return nil, fmt.Errorf("dynamostore: %s of %d bytes: %w", kind, len(b), err)
		}
		t.s.blobCache.put(key, b)
		return map[string]types.AttributeValue{PartitionKey: str(pk), attrKind: str(kind), attrBlob: str(key)}, nil
	}
	if len(b) > maxTurnItemBytes {
		return nil, fmt.Errorf("dynamostore: a %s of %d bytes is over the %d-byte item bound and the store has no S3 bucket for large payloads: %w",
			kind, len(b), maxTurnItemBytes, ErrTurnCommitTooLarge)
	}
	return map[string]types.AttributeValue{PartitionKey: str(pk), attrKind: str(kind), attrDoc: str(string(b))}, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// decodeDoc decodes a turn item's doc, reading it from S3 when the item
// names a blob: the blob must lie under the prefix of the item's instance
// incarnation (blobPrefix: under) and the object hash to its name (what
// was written is what is read, or the item is corrupt).
func (t turnStore) decodeDoc(ctx context.Context, item map[string]types.AttributeValue, kind, under string, v any) error {
	if err := checkKind(item, kind); err != nil {
		return err
	}
	var doc []byte
	if key, ok := item[attrBlob].(*types.AttributeValueMemberS); ok {
		b, err := t.blob(ctx, key.Value, under)
		if err != nil {
			return err
		}
		doc = b
	} else {
		s, err := needS(item, attrDoc)
		if err != nil {
			return err
		}
		doc = []byte(s)
	}
	if json.Unmarshal(doc, v) != nil {
		return fmt.Errorf("%w: %s doc is not valid JSON of its record", domain.ErrCorrupt, kind)
	}
	return nil
}

// blob reads the object key names, from the cache when this Store has
// read or written it (content-addressed: a name never changes content).
// A key outside under is never read, nor looked up: an item that names
// another instance's object (or any other) would read it as its own.
func (t turnStore) blob(ctx context.Context, key, under string) ([]byte, error) {
	if !blobUnder(key, under) {
		return nil, fmt.Errorf("%w: a turn item names an S3 object outside its instance's prefix", domain.ErrCorrupt)
	}
	if b, ok := t.s.blobCache.get(key); ok {
		return b, nil
	}
	if t.blobs == nil {
		return nil, fmt.Errorf("%w: a turn item keeps its doc in S3 and this store has no bucket", domain.ErrCorrupt)
	}
	b, err := t.blobs.Get(ctx, key)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, fmt.Errorf("%w: the S3 object of a turn item is missing", domain.ErrCorrupt)
	}
	if err != nil {
		return nil, err
	}
	if i := strings.LastIndexByte(key, '/'); i < 0 || sha256Hex(b) != key[i+1:] {
		return nil, fmt.Errorf("%w: the S3 object of a turn item does not match its name", domain.ErrCorrupt)
	}
	t.s.blobCache.put(key, b)
	return b, nil
}

// Turns returns the turn.Store on the Store's table.
//
// blobs keeps the docs over BlobThreshold (nil: none, and a doc over the
// item bound refuses its commit).
func (s *Store) Turns(blobs Blobs) turn.Store { return turnStore{s: s, blobs: blobs} }

type turnStore struct {
	s     *Store
	blobs Blobs
}

var _ turn.Store = turnStore{}

// getInst reads the instance item and remembers its doc; ok false when
// there is none.
func (t turnStore) getInst(ctx context.Context, h string) (instDoc, bool, error) {
	out, err := t.s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(t.s.table), Key: key(turnInstPK(h)), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return instDoc{}, false, t.s.apiError(err)
	}
	if out.Item == nil {
		return instDoc{}, false, nil
	}
	d, err := t.decodeInst(ctx, h, out.Item)
	if err != nil {
		return instDoc{}, false, err
	}
	t.s.known.setTurnInst(h, out.Item)
	return d, true, nil
}

// decodeInst decodes the instance item of h. The known cache keeps the
// item, not the decoded doc: a State handed to a caller shares the doc's
// maps.
func (t turnStore) decodeInst(ctx context.Context, h string, item map[string]types.AttributeValue) (instDoc, error) {
	var d instDoc
	if err := t.decodeDoc(ctx, item, kindTurnInstance, instBlobPrefix(h, item), &d); err != nil {
		return instDoc{}, err
	}
	v, err := needN(item, attrVersion)
	if err != nil {
		return instDoc{}, err
	}
	e, err := needS(item, attrEpoch)
	if err != nil {
		return instDoc{}, err
	}
	if v != d.Instance.Version || e != d.Epoch {
		return instDoc{}, fmt.Errorf("%w: turn instance attributes and doc disagree", domain.ErrCorrupt)
	}
	return d, nil
}

// Load reads the instance item, then the base, message and turn event
// items it names in BatchGetItem requests. A commit that rebased between
// the two reads may have removed old items: Load then reads again.
func (t turnStore) Load(ctx context.Context, k turn.InstanceKey) (turn.State, error) {
	if err := k.Validate(); err != nil {
		return turn.State{}, err
	}
	h := turnHash(k)
	for range 3 {
		d, ok, err := t.getInst(ctx, h)
		if err != nil {
			return turn.State{}, fmt.Errorf("dynamostore: load instance %s: %w", h[:12], err)
		}
		if !ok {
			return turn.State{}, fmt.Errorf("dynamostore: instance %s: %w", h[:12], domain.ErrNotFound)
		}
		st, missing, err := t.loadParts(ctx, h, d)
		if err != nil {
			return turn.State{}, fmt.Errorf("dynamostore: load instance %s: %w", h[:12], err)
		}
		if !missing {
			return st, nil
		}
	}
	return turn.State{}, fmt.Errorf("dynamostore: instance %s: items it names are missing: %w", h[:12], domain.ErrCorrupt)
}

// loadParts builds the State of d, reading the items it names; missing
// reports that one of them is gone.
func (t turnStore) loadParts(ctx context.Context, h string, d instDoc) (turn.State, bool, error) {
	bp := blobPrefix(h, d.Epoch)
	h = itemsKey(h, d)
	var pks []string
	if d.HasBase {
		pks = append(pks, turnBasePK(h, d.Gen))
	}
	for i := range d.Messages {
		pks = append(pks, turnMsgPK(h, d.Gen, i))
	}
	// The events of live turns only: an ended turn's (up to turn.KeepTurns
	// of them, each with its events) are read by TurnEvents, when asked.
	for id := range d.Turns {
		for i := range d.TurnEvents[id] {
			pks = append(pks, turnLogPK(h, id, i))
		}
	}
	for _, id := range d.Ended {
		pks = append(pks, turnRecPK(h, id))
	}
	items, err := t.s.batchGet(ctx, pks)
	if err != nil {
		return turn.State{}, false, err
	}
	st := turn.State{
		Instance: d.Instance, Turns: d.Turns, Calls: d.Calls, Backlog: d.Backlog, Processed: d.Processed,
		TurnEvents: map[string][]turn.TurnEvent{},
	}
	st.Turns = make(map[string]turn.Turn, len(d.Turns)+len(d.Ended))
	for id, tn := range d.Turns {
		st.Turns[id] = tn
	}
	if st.Calls == nil {
		st.Calls = map[string]turn.Call{}
	}
	get := func(pk, kind string, v any) (bool, error) {
		item, ok := items[pk]
		if !ok {
			return false, nil
		}
		return true, t.decodeDoc(ctx, item, kind, bp, v)
	}
	if d.HasBase {
		if ok, err := get(turnBasePK(h, d.Gen), kindTurnBase, &st.Base); !ok || err != nil {
			return turn.State{}, !ok, err
		}
	}
	for i := range d.Messages {
		var ev message.Event
		if ok, err := get(turnMsgPK(h, d.Gen, i), kindTurnMessage, &ev); !ok || err != nil {
			return turn.State{}, !ok, err
		}
		st.Events = append(st.Events, ev)
	}
	for id := range d.Turns {
		n := d.TurnEvents[id]
		evs := make([]turn.TurnEvent, 0, n)
		for i := range n {
			var ev turn.TurnEvent
			if ok, err := get(turnLogPK(h, id, i), kindTurnEvent, &ev); !ok || err != nil {
				return turn.State{}, !ok, err
			}
			evs = append(evs, ev)
		}
		st.TurnEvents[id] = evs
	}
	for _, id := range d.Ended {
		var tn turn.Turn
		if ok, err := get(turnRecPK(h, id), kindTurnRecord, &tn); !ok || err != nil {
			return turn.State{}, !ok, err
		}
		st.Turns[tn.ID] = tn
	}
	return st, false, nil
}

// TurnEvents reads the instance item, then one turn's record (when it
// has ended) and its events after after, by key: the i-th stored event of
// a turn has Seq i, so only the later ones are read.
func (t turnStore) TurnEvents(ctx context.Context, k turn.InstanceKey, turnID string, after int64) (turn.Turn, []turn.TurnEvent, error) {
	if err := k.Validate(); err != nil {
		return turn.Turn{}, nil, err
	}
	h := turnHash(k)
	for range 3 {
		d, ok, err := t.getInst(ctx, h)
		if err != nil {
			return turn.Turn{}, nil, fmt.Errorf("dynamostore: turn events of %s: %w", h[:12], err)
		}
		if !ok {
			return turn.Turn{}, nil, fmt.Errorf("dynamostore: instance %s: %w", h[:12], domain.ErrNotFound)
		}
		tn, live := d.Turns[turnID]
		if !live && !slices.Contains(d.Ended, turnID) {
			return turn.Turn{}, nil, fmt.Errorf("dynamostore: turn %q of instance %s: %w", turnID, h[:12], domain.ErrNotFound)
		}
		ih, bp := itemsKey(h, d), blobPrefix(h, d.Epoch)
		var pks []string
		if !live {
			pks = append(pks, turnRecPK(ih, turnID))
		}
		from := int(max(after+1, 0))
		for i := from; i < d.TurnEvents[turnID]; i++ {
			pks = append(pks, turnLogPK(ih, turnID, i))
		}
		items, err := t.s.batchGet(ctx, pks)
		if err != nil {
			return turn.Turn{}, nil, fmt.Errorf("dynamostore: turn events of %s: %w", h[:12], err)
		}
		if len(items) != len(pks) {
			continue // a commit forgot the turn meanwhile: read the instance again
		}
		if !live {
			if err := t.decodeDoc(ctx, items[pks[0]], kindTurnRecord, bp, &tn); err != nil {
				return turn.Turn{}, nil, err
			}
		}
		var evs []turn.TurnEvent
		for i := from; i < d.TurnEvents[turnID]; i++ {
			var ev turn.TurnEvent
			if err := t.decodeDoc(ctx, items[turnLogPK(ih, turnID, i)], kindTurnEvent, bp, &ev); err != nil {
				return turn.Turn{}, nil, err
			}
			if ev.Seq > after {
				evs = append(evs, ev)
			}
		}
		return tn, evs, nil
	}
	return turn.Turn{}, nil, fmt.Errorf("dynamostore: turn %q of instance %s: its items keep changing: %w", turnID, h[:12], domain.ErrConflict)
}

// batchGet reads the items pks name with strongly consistent
// BatchGetItem requests, by key; an absent item is absent from the map.
func (s *Store) batchGet(ctx context.Context, pks []string) (map[string]map[string]types.AttributeValue, error) {
	out := make(map[string]map[string]types.AttributeValue, len(pks))
	for len(pks) > 0 {
		n := min(len(pks), maxBatchGet)
		keys := make([]map[string]types.AttributeValue, 0, n)
		for _, pk := range pks[:n] {
			keys = append(keys, key(pk))
		}
		pks = pks[n:]
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for backoff := 0; len(req) > 0; backoff++ {
			if backoff > 0 {
				// Unprocessed keys: DynamoDB throttled part of the batch.
				if err := sleepCtx(ctx, min(time.Duration(backoff)*20*time.Millisecond, time.Second)); err != nil {
					return nil, err
				}
			}
			res, err := s.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, s.apiError(err)
			}
			for _, item := range res.Responses[s.table] {
				pk, ok := getPK(item)
				if !ok {
					return nil, fmt.Errorf("%w: an item without a string key", domain.ErrCorrupt)
				}
				out[pk] = item
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// Commit checks c against the instance item (what this Store last saw of
// it when that is version c.Expect, else a consistent read), applies it
// with turn.Apply, and writes it in one TransactWriteItems: the instance
// item on condition of its version, and new items for the messages, turn
// events and the base of a rebase. Items a rebase leaves behind (the old
// base and messages, the events of forgotten turns) are deleted after the
// transaction; see the package documentation.
func (t turnStore) Commit(ctx context.Context, c turn.Commit) error {
	if err := c.Validate(); err != nil {
		return err
	}
	h := turnHash(c.Instance.Key)
	// A new instance needs no read: the condition is the item's absence.
	var old instDoc
	if item, ok := t.s.known.turnInst(h); ok && c.Expect != 0 {
		if d, err := t.decodeInst(ctx, h, item); err == nil {
			old = d
		}
	}
	if c.Expect != 0 && old.Instance.Version != c.Expect {
		var err error
		if old, _, err = t.getInst(ctx, h); err != nil {
			return fmt.Errorf("dynamostore: commit to instance %s: %w", h[:12], err)
		}
	}
	if old.Instance.Version != c.Expect {
		return turn.ErrStale
	}
	small := turn.State{
		Instance: old.Instance, Turns: make(map[string]turn.Turn, len(old.Turns)+len(old.Ended)), Calls: old.Calls, Backlog: old.Backlog,
		Processed: old.Processed, TurnEvents: map[string][]turn.TurnEvent{},
	}
	for id, tn := range old.Turns {
		small.Turns[id] = tn
	}
	// Ended turns as stubs: what turn.Apply reads of them to forget the
	// oldest — that they ended, and their order (as start times before
	// any real one: a turn ending now started after them all).
	for i, id := range old.Ended {
		small.Turns[id] = turn.Turn{ID: id, Status: turn.TurnCompleted, StartedAt: time.Unix(0, int64(i+1)).UTC()}
	}
	for id := range old.TurnEvents {
		small.TurnEvents[id] = nil // Apply drops the entries of forgotten turns
	}
	next, err := turn.Apply(small, c)
	if err != nil {
		return err
	}
	d := instDoc{
		Instance: next.Instance, Turns: map[string]turn.Turn{}, Calls: next.Calls, Backlog: next.Backlog, Processed: next.Processed,
		Gen: old.Gen, HasBase: old.HasBase, Messages: old.Messages, TurnEvents: map[string]int{},
	}
	// The ended turns Apply kept, oldest first. A turn this commit ends
	// (or carries again, ended) gets its item written below, and so does
	// an ended turn the old instance item still held whole (written before
	// ended turns had items of their own).
	var records, ended []turn.Turn
	for id, tn := range next.Turns {
		if !tn.Status.Ended() {
			d.Turns[id] = tn
			continue
		}
		ended = append(ended, tn)
		if _, whole := old.Turns[id]; whole || c.Turn != nil && c.Turn.ID == id {
			records = append(records, tn)
		}
	}
	slices.SortFunc(ended, func(a, b turn.Turn) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	for _, tn := range ended {
		d.Ended = append(d.Ended, tn.ID)
	}
	if d.Epoch = old.Epoch; c.Expect == 0 {
		if d.Epoch, err = newEpoch(); err != nil {
			return err
		}
	}
	ih, bp := itemsKey(h, d), blobPrefix(h, d.Epoch)
	var puts []map[string]types.AttributeValue
	if c.Rebase {
		d.Gen, d.HasBase, d.Messages = old.Gen+1, true, 0
		item, err := t.docItem(ctx, bp, turnBasePK(ih, d.Gen), kindTurnBase, c.NewBase)
		if err != nil {
			return err
		}
		puts = append(puts, item)
	}
	for _, m := range c.Messages {
		item, err := t.docItem(ctx, bp, turnMsgPK(ih, d.Gen, d.Messages), kindTurnMessage, m)
		if err != nil {
			return err
		}
		puts = append(puts, item)
		d.Messages++
	}
	for _, tn := range records {
		item, err := t.docItem(ctx, bp, turnRecPK(ih, tn.ID), kindTurnRecord, tn)
		if err != nil {
			return err
		}
		puts = append(puts, item)
	}
	for id := range next.TurnEvents {
		d.TurnEvents[id] = old.TurnEvents[id]
	}
	for _, e := range c.Events {
		item, err := t.docItem(ctx, bp, turnLogPK(ih, e.TurnID, d.TurnEvents[e.TurnID]), kindTurnEvent, e)
		if err != nil {
			return err
		}
		puts = append(puts, item)
		d.TurnEvents[e.TurnID]++
	}
	inst, err := t.docItem(ctx, bp, turnInstPK(h), kindTurnInstance, d)
	if err != nil {
		return err
	}
	inst[attrVersion] = num(d.Instance.Version)
	inst[attrEpoch] = str(d.Epoch)
	listAttrs, err := instanceListAttrs(h, d.Instance)
	if err != nil {
		return err
	}
	maps.Copy(inst, listAttrs)
	if n := len(puts) + 1; n > maxTurnTxItems {
		return fmt.Errorf("dynamostore: commit to instance %s writes %d items, over %d: %w", h[:12], n, maxTurnTxItems, ErrTurnCommitTooLarge)
	}
	put := &types.Put{TableName: aws.String(t.s.table), Item: inst}
	if c.Expect == 0 {
		put.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		put.ExpressionAttributeNames = map[string]string{"#pk": PartitionKey}
	} else {
		// The epoch too: what this Store saw of an instance deleted and
		// created again since may have the same version.
		put.ConditionExpression = aws.String("#v = :expect AND #e = :epoch")
		put.ExpressionAttributeNames = map[string]string{"#v": attrVersion, "#e": attrEpoch}
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":expect": num(c.Expect), ":epoch": str(d.Epoch)}
	}
	items := []types.TransactWriteItem{{Put: put}}
	for _, item := range puts {
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(t.s.table), Item: item}})
	}
	if _, err := t.s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
		t.s.known.dropTurnInst(h)
		var canceled *types.TransactionCanceledException
		if errors.As(err, &canceled) {
			for _, r := range canceled.CancellationReasons {
				// The version moved, or another writer's transaction holds
				// the instance or an item only a writer of the same version
				// names: either way the caller reloads.
				if c := aws.ToString(r.Code); c == "ConditionalCheckFailed" || c == "TransactionConflict" {
					return turn.ErrStale
				}
			}
		}
		err = t.s.apiError(err)
		if errors.Is(err, domain.ErrConflict) {
			// Another transaction held the instance item: it moved on.
			return turn.ErrStale
		}
		return fmt.Errorf("dynamostore: commit to instance %s: %w", h[:12], err)
	}
	t.s.known.setTurnInst(h, inst)
	t.s.deleteItems(ctx, leftBehind(h, old, d))
	return nil
}

// leftBehind are the items old named that d no longer does: the base and
// messages of an older generation, the events of forgotten turns.
func leftBehind(h string, old, d instDoc) []string {
	h = itemsKey(h, old)
	var pks []string
	if old.Gen != d.Gen {
		if old.HasBase {
			pks = append(pks, turnBasePK(h, old.Gen))
		}
		for i := range old.Messages {
			pks = append(pks, turnMsgPK(h, old.Gen, i))
		}
	}
	for id, n := range old.TurnEvents {
		if _, kept := d.TurnEvents[id]; kept {
			continue
		}
		for i := range n {
			pks = append(pks, turnLogPK(h, id, i))
		}
	}
	for _, id := range old.Ended {
		if !slices.Contains(d.Ended, id) {
			pks = append(pks, turnRecPK(h, id))
		}
	}
	return pks
}

// deleteItems removes items no instance item names any more. It is best
// effort: no read follows such an item, and a failure leaves it behind
// (the error is not the commit's, which has happened).
func (s *Store) deleteItems(ctx context.Context, pks []string) int {
	failed := 0
	for _, pk := range pks {
		if _, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk)}); err != nil {
			failed++
		}
	}
	return failed
}

// List scans the table for instance items. An item that does not decode
// is named by its key hash (12 hex digits) among the unreadable; the
// others are listed all the same.
func (t turnStore) List(ctx context.Context) ([]turn.Instance, []turn.Unreadable, error) {
	var out []turn.Instance
	var unreadable []turn.Unreadable
	bad, err := t.s.scanKind(ctx, kindTurnInstance, turnInstPrefix, func(string) error { return nil },
		func(h string, item map[string]types.AttributeValue) error {
			var d instDoc
			if err := t.decodeDoc(ctx, item, kindTurnInstance, instBlobPrefix(h, item), &d); err != nil {
				if ctx.Err() != nil {
					return errStop{ctx.Err()}
				}
				id := h[:min(12, len(h))]
				unreadable = append(unreadable, turn.Unreadable{ID: id, Reason: unreadableReason(err),
					Err: fmt.Errorf("dynamostore: list turn instances: instance %s: %w", id, err)})
				return nil
			}
			out = append(out, d.Instance)
			return nil
		})
	if err != nil {
		return nil, nil, fmt.Errorf("dynamostore: list turn instances: %w", err)
	}
	for _, e := range bad { // an instance item under a key of another shape
		unreadable = append(unreadable, turn.Unreadable{ID: "unknown", Reason: "an instance item whose key is not an instance's",
			Err: fmt.Errorf("dynamostore: list turn instances: %w", e)})
	}
	return out, unreadable, nil
}

// unreadableReason is the safe part of an instance item's read error: a
// corrupt record's own description (attribute names, never values), or
// that the read failed.
func unreadableReason(err error) string {
	if errors.Is(err, domain.ErrCorrupt) {
		return err.Error()
	}
	return "its document could not be read"
}

// Delete removes the instance item on condition of the version read, then
// every item it named. A failure after the first delete leaves items no
// instance names; a new instance of the key starts past them (its Gen
// and turn ids decide what it reads).
func (t turnStore) Delete(ctx context.Context, k turn.InstanceKey) error {
	if err := k.Validate(); err != nil {
		return err
	}
	h := turnHash(k)
	d, ok, err := t.getInst(ctx, h)
	if err != nil {
		return fmt.Errorf("dynamostore: delete instance %s: %w", h[:12], err)
	}
	if !ok {
		return fmt.Errorf("dynamostore: delete instance %s: %w", h[:12], domain.ErrNotFound)
	}
	_, err = t.s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(t.s.table), Key: key(turnInstPK(h)),
		ConditionExpression:       aws.String("#v = :v"),
		ExpressionAttributeNames:  map[string]string{"#v": attrVersion},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(d.Instance.Version)},
	})
	t.s.known.dropTurnInst(h)
	if _, failed := conditionFailed(err); failed {
		return turn.ErrStale
	} else if err != nil {
		return fmt.Errorf("dynamostore: delete instance %s: %w", h[:12], t.s.apiError(err))
	}
	if n := t.s.deleteItems(ctx, leftBehind(h, d, instDoc{Gen: d.Gen + 1})); n > 0 {
		return fmt.Errorf("dynamostore: instance %s deleted, %d of its items left behind", h[:12], n)
	}
	if t.blobs != nil {
		if err := t.blobs.DeletePrefix(ctx, blobPrefix(h, d.Epoch)); err != nil {
			return fmt.Errorf("dynamostore: instance %s deleted, its S3 objects left behind: %w", h[:12], err)
		}
	}
	return nil
}
