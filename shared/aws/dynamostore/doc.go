// Package dynamostore is the AWS domain.Store: sealed grants, auth sessions
// and refresh leases in one DynamoDB table, shared by every Lambda. It is
// also the AWS domain.TenantStore: tenants' run-time uploads, plain JSON,
// in the same table; and, as ToolLimiter, the state of the tools'
// per-(principal, tool) rate limit (the algorithm is shared/tools/ratelimit);
// and, through [Store.Turns], the turn.Store of agent instances.
//
// Every rule of the port is enforced by a DynamoDB condition on the write
// itself (attribute_not_exists, version equality, pending status, lease
// owner and expiry), never by reading first and writing after, so two
// Lambdas racing on one record cannot both win. CompleteSession is a single
// TransactWriteItems over the session and the grant.
//
// It must never log an item or put item contents in an error (errors name
// the record id and what failed, and an SDK error only as awserr describes
// it: code, status, request id, never its message), and never write a secret
// unsealed: records carry only the domain.EncryptedValues the sealer
// produced, and this package seals or opens nothing except in Reseal,
// through the sealer it is given. It never builds a key from an id it has
// not validated, and never overwrites a record it cannot decode.
//
// # Table layout
//
// One table, partition key [PartitionKey] ("pk", a string), no sort key,
// on-demand billing, TimeToLive on [TTLAttribute] ("ttl"), two global
// secondary indexes over session items and two for the operator lists;
// [TableSchema] and [TimeToLiveSpec] give the requests that create it
// (infra/stack creates the same). Items:
//
//	pk                               kind               other attributes
//	grant#<grantId>                  OAuthGrantRecord   version N, createdAt S, doc S, listKey S, listAll S, listSort S
//	session#<sessionId>              AuthSessionRecord  version N, status S, completedAt S (once set), ttl N (see below), doc S,
//	                                                    expiresAt N, sweepSet S, pendingFor S (while pending),
//	                                                    listKey S, listAll S, listSort S
//	reuse#<reuseKey>                 SessionReuse       sessionId S, reuseUntil N (Unix ms), ttl N
//	lease#<sha256 hex(key)>          Lease              owner S, expiresAt N (Unix ms), ttl N
//	tenantres#<tenant>#<kind>#<name> TenantResource     tenant S, resourceKind S (Skill or Tool), name S, spec S, updatedAt S
//	tenantrev                        TenantRevision     revision N
//	ratelimit#<ratelimit.Key>        RateLimit          tat N (Unix µs), ttl N
//	turninst#<h>                     TurnInstance       version N, epoch S, doc S (see Turn store), instance S,
//	                                                    listKey S, listAll S, listSort S
//	turnbase#<h>#<e>#<gen>           TurnBase           doc S
//	turnmsg#<h>#<e>#<gen>#<i>        TurnMessage        doc S
//	turnlog#<h>#<e>#<t>#<i>          TurnEvent          doc S
//	turnrec#<h>#<e>#<t>              TurnRecord         doc S (an ended turn)
//	audit#<listSort>                 ToolAudit          doc S, ttl N, listKey S, listAll S, listSort S
//	turnstats#<2006-01-02T15>        TurnHourStats      hour S, completed N, failed N, parked N, parkedSeconds N, ttl N
//	turnstatsmark#<m>                TurnStatsMarker    hour S, ttl N (a turn counted in that hour)
//
// doc is the record's JSON as domain's JSON tags give it, sealed values
// inline, minus the fields kept as attributes (the grant's version and
// createdAt; the session's version, status and completedAt), which a read
// merges back. Keeping those outside doc is what lets CompleteSession
// complete a session and keep a grant's CreatedAt without rewriting or
// reading the other fields.
//
// ttl is in epoch seconds: a session's expiresAt plus [SessionRetention],
// so DynamoDB removes finished sessions, and a lease's expiry plus
// [LeaseRetention]. Grants never expire, and neither does a session whose
// auth.granted event is still pending (eventPending): it keeps no ttl until
// the sweep has delivered the event.
//
// # Session indexes
//
// A session item's expiresAt (Unix ms), sweepSet (its domain.SweepSet) and
// pendingFor (its resume target's domain.ResumeTargetKey, a hash of the
// swarm, the instance key and the agent name, present only while the
// session is pending and its target complete) are copies of what doc and
// status say, written by every write of the item: CreateSession and
// UpdateSession put the whole item, CompleteSession SETs sweepSet and
// expiresAt and REMOVEs pendingFor in its update. They key two global
// secondary indexes:
//
//	index              partition key  sort key      projection  holds
//	[PendingIndex]     pendingFor S   expiresAt N   ALL         pending sessions only (sparse)
//	[SweepIndex]       sweepSet S     expiresAt N   KEYS_ONLY   every session
//
// Global secondary indexes follow the table within about a second, and a
// Query of one reads what it holds, not the table: a session that left
// pending a moment ago may still be listed by ListPendingSessions (its
// snapshot says pending), one created a moment ago missed. The sweep
// re-reads each session it lists with a strongly consistent GetItem and
// acts only on what is stored now (its writes are conditional anyway).
//
// pendingFor names the whole target: two swarms that share an instance key
// and an Agent name are two partitions, and neither's Query reads the
// other's consent links. Versions before issue 17 wrote a hash of the
// instance key and agent name alone (64 hex digits, where the target key
// is "rt-" and 64), so for the sessions they left pending
// ListPendingSessions queries that key too, at the same time, and keeps
// only what is the target's; their next write moves them to the new key.
// The index definition did not change.
//
// SweepIndex has four partition key values, one per set. It is not
// sharded: one value takes about 1,000 writes a second (its sort key
// grows with time, so DynamoDB cannot split it by heat), its items (keys
// only) cost one write unit each, and the busiest set (pending: one write
// when a session is created, one when it leaves) would throttle at about
// 500 new sessions a second, far above what people giving consent
// produce; a throttled index write throttles the table write with it.
// Sharding (sweepSet#<digit>) would multiply the sweep's queries by the
// shard count. PendingIndex spreads by resume target.
//
// # List indexes
//
// The operator console's lists (domain.OperatorQueries, turn.InstanceQuerier)
// read two more global secondary indexes, both sparse (only grant, session
// and instance items carry their keys) and keys only:
//
//	index              partition key  sort key     projection  holds
//	[ListIndex]        listKey S      listSort S   KEYS_ONLY   grant#t#<tenant>, session#t#<tenant>, turninst#<swarm>
//	[ListAllIndex]     listAll S      listSort S   KEYS_ONLY   grant, session, turninst (every tenant, every swarm)
//
// listSort is domain.ListKey of the record's creation time and id (an
// instance's key hash h): its creation time inverted, so ascending order
// is newest first and a page's Next is the last sort key it examined. A
// grant's starts with "a#" while active, "f#" while active with its
// refreshes failing (RefreshFailures > 0) and "r#" once revoked, so they
// are three ranges of one partition, read apart (Revoked set: a# and f#
// merged, or r#; CountGrants; CountFailingGrants, f# alone) or all merged
// (Revoked nil). Every write of the item sets the three attributes from
// the record it writes; they depend on the tenant, the creation time, the
// id and, for a grant, the revoked flag and whether its refreshes are
// failing, alone, so a refresh (PutGrant keeping createdAt), an
// UpdateSession or CompleteSession, and an instance commit leave them as
// they are and write neither index (DynamoDB writes a keys-only index only
// when one of its key attributes changes): a grant costs index writes when
// it is created, when its refreshes start failing and when one succeeds
// again, and when it is revoked. A tenant's grants are one
// partition, a platform admin's every grant another; "" is the tenant of
// records whose request named none.
//
// A page is a Query of the range (Limit: what the page still needs, or a
// batch of 100 when it filters), then one strongly consistent BatchGetItem
// of the items it names; the items decide (tenant, revoked, app, subject,
// status, reason, agent): an index lags its table by up to about a second,
// so an item the index lists under a scope it has left is skipped, one
// gone is skipped, and one that changed range a moment ago may show in a
// merged page once. Filters no index keys (a grant's app and subject, a
// session's app, status and reason, an instance's agent and status) are
// applied to the items read, at most 500 entries per page: a page that
// reaches the bound ends with the entries it found and a Next from the last
// entry examined. Since is a sort key bound. CountGrants is a Select COUNT
// Query per range, stopped at limit+1.
//
// An instance item also carries its instance record (turn.Instance, JSON)
// as instance S, so a list reads that and not the doc, which may be in S3.
//
// The all-tenants partitions (grant, session, turninst) each take every
// creation of their kind, about 1,000 writes a second before DynamoDB
// throttles them: far above what consent or new conversations produce.
//
// Items written before these attributes existed are in neither index
// until a write puts them there: their own next write (a grant's refresh,
// revocation or consent, an instance's next commit; sessions expire
// within a day, SessionRetention), or [Store.BackfillListIndex], run once
// after the upgrade, which scans for the grant, session and instance items
// without listSort and sets their list attributes, each on condition of
// the version it read (a grant that is never refreshed would otherwise
// never be listed). `agentauth admin backfill-list-index` runs it
// ([Store.BackfillListIndexProgress], to print its progress;
// docs/deploy.md).
//
// # Session reuse
//
// A reuse#<reuseKey> item points at the session that took the
// domain.SessionReuseKey, and is written in the CreateSession transaction
// of that session, on condition that there is no pointer, its reuseUntil
// (the session's expiresAt minus domain.SessionReuseMargin, rounded up to
// the millisecond) has passed, or it names a session CreateSession has
// just read and found not to hold the key. It is never updated when its
// session changes: FindPendingSession reads the session it names and
// returns it only when that session holds the key and is reusable now. So
// a pointer left behind by a session that completed, failed or was
// deleted never yields it, and TTL removes pointers after their session's
// expiry. Replacing a stale pointer is the one write that follows a read:
// safe, because a session never returns to pending, and the retry's
// condition pins the pointer to the session that was read.
//
// # Access patterns
//
// Every read and write of the store, with its key (no operation of the
// request path, the callback or the sweep scans):
//
//	operation                        calls (key; index)
//	GetGrant                         GetItem grant#id, consistent
//	PutGrant                         PutItem grant#id, condition on version (or absence)
//	ListGrants (operator)            Scan, filter kind; all pages
//	QueryGrants (console)            Query ListIndex: listKey = grant#t#<tenant> (ListAllIndex: listAll = grant)
//	                                 AND listSort BETWEEN a#<after> AND a#~ (and f#…, r#…, merged), Limit the page;
//	                                 then BatchGetItem (consistent) of the page; with app or subject, rounds of
//	                                 100 up to 500 entries a page
//	CountGrants (console)            Query ListIndex or ListAllIndex, Select COUNT, per range, up to limit+1
//	CountFailingGrants (console)     the same on the f# range alone
//	QuerySessions (console)          Query ListIndex: listKey = session#t#<tenant> AND listSort BETWEEN <after>
//	                                 AND <since bound>; then BatchGetItem, as QueryGrants
//	CreateSession, no reuse key      PutItem session#id, condition attribute_not_exists
//	CreateSession, reuse key         TransactWriteItems [Put session#id, Put reuse#key]; when the pointer's
//	                                 condition fails: GetItem session#<holder>, and again the transaction
//	                                 when the holder is stale
//	FindPendingSession               GetItem reuse#key, then GetItem session#<sessionId> (both consistent)
//	GetSession                       GetItem session#id, consistent
//	UpdateSession                    PutItem session#id, condition on version
//	CompleteSession                  TransactWriteItems [Update session#id (condition: version, status, doc),
//	                                 Put grant#id (condition: version or absence)]; GetItem session#id first
//	                                 only when this Store has not seen the session
//	ListPendingSessions              Query PendingIndex: pendingFor = ResumeTargetKey(swarm, instance, agent)
//	                                 AND expiresAt >= at; alongside, the same with the key before issue 17
//	ListSweepSessions                Query SweepIndex: sweepSet = set [AND expiresAt <= expiredBy], then
//	                                 GetItem session#id (consistent) per listed session
//	ListSessions (operator)          Scan, filter kind; all pages
//	DeleteSession                    DeleteItem session#id, condition attribute_exists
//	AcquireLease                     PutItem lease#hash, condition: absent, ended, or same owner
//	ReleaseLease                     DeleteItem lease#hash, condition on owner
//	ToolLimiter.Allow                UpdateItem ratelimit#key, condition GCRA's rule (one or two)
//	PutTenantResource, DeleteTenantResource
//	                                 TransactWriteItems [Put or Delete tenantres#…, Update tenantrev ADD 1]
//	TenantRevision                   GetItem tenantrev, consistent
//	ListTenantResources              Scan, filter kind; all pages
//	HasRecords, KeyIDs, Reseal       Scan (operator commands)
//	BackfillListIndex                Scan, filter kind and no listSort; per item TransactWriteItems [Update,
//	                                 condition version and no listSort] (operator command, once after upgrading)
//	Turns().Load                     GetItem turninst#h (consistent), then BatchGetItem (consistent, 100 keys
//	                                 a request) of the base, message and turn event items it names
//	Turns().Commit                   TransactWriteItems [Put turninst#h (condition: version = expect and
//	                                 epoch, or absence), Put turnbase# on a rebase, Put turnmsg# and turnlog#
//	                                 per new message and turn event]; GetItem turninst#h first only when this
//	                                 Store has not seen the expected version; after a rebase, DeleteItem per
//	                                 item left behind
//	Turns().List (operator)          Scan, filter kind; all pages
//	Turns().QueryInstances (console) Query ListIndex: listKey = turninst#<swarm> (ListAllIndex: listAll =
//	                                 turninst) AND listSort BETWEEN <after> AND ~; then BatchGetItem, as QueryGrants
//	Turns().Delete                   GetItem turninst#h, DeleteItem turninst#h (condition on version), then
//	                                 DeleteItem per item it named
//	ToolAudit().AppendToolAudit      PutItem audit#<listSort>, condition attribute_not_exists
//	ToolAudit().QueryToolAudit       Query ListIndex: listKey = audit#t#<tenant> (ListAllIndex: listAll =
//	                                 audit) AND listSort BETWEEN <after> AND <retention bound>; then
//	                                 BatchGetItem, as QueryGrants
//	TurnStats().RecordTurnEnd        TransactWriteItems [Put turnstatsmark#m (condition attribute_not_exists),
//	                                 Update turnstats#<hour> (SET kind, hour, ttl; ADD the counters)]
//	TurnStats().Hours                BatchGetItem (consistent) of the range's turnstats# items (100 keys a request)
//
// A TenantResource is one upload: spec is its JSON byte for byte, as a
// string (uploads are not secrets; nothing in them is sealed). Validated
// tenants, kinds and names hold no '#', so the key splits back. tenantrev
// counts upload writes: every put or delete of an upload is one
// TransactWriteItems with an ADD 1 to it, so the two never disagree.
// Listing uploads is a Scan of the whole table filtered on kind; reading
// the revision is one GetItem.
//
// A RateLimit item is one GCRA bucket (see ToolLimiter): tat is its
// theoretical arrival time, ttl the time after which the item means the
// same as no item. It holds no principal, only the bucket's Key.
//
// # Turn store
//
// An agent instance (turn.State) is one TurnInstance item and the items it
// names; h is the hex sha256 of the instance key's printable form, so any
// valid key fits and no key part can reach another instance's items. The
// table has no sort key, so a Query cannot read an instance's items
// together; rather than a third global secondary index (eventually
// consistent, where Load must see the last commit, and a second write per
// item), the instance item names its other items and Load reads them by
// key with strongly consistent BatchGetItem requests.
//
// The instance item's doc holds the small state: the instance record, the
// turns that have not ended, the calls of live turns, the backlog, the
// processed event ids (at most turn.KeepProcessed), the ids of the kept
// ended turns (oldest first), and the names of the rest: e (the
// epoch, random hex drawn when the instance is created, so an instance
// deleted and created again shares no item with the old one, whose
// removal may still be running), gen (the
// base's generation), whether there is a base, the number of message
// events of that generation, and the number of stored events of each kept
// turn. Its version attribute is the instance version, the fence of every
// commit, with its epoch attribute: a Store's memory of an instance
// deleted and created again may have the current version, never the
// current epoch. The unbounded parts are one item each: the base (turnbase, one
// per generation: the fold at a turn's end), each message event since
// (turnmsg, by append index within the generation) and each turn event
// (turnlog, by append index within the turn, which is its Seq; t is the
// first 16 bytes of the turn id's sha256, hex), and each kept ended turn
// (turnrec, written by the commit that ends it: the instance item, which
// every commit rewrites, does not carry up to turn.KeepTurns ended turns).
// Load reads the base, the messages, the ended turns and the events of the
// live turns; TurnEvents reads one turn's record and events.
//
// A commit is computed by turn.Apply over the instance item's state and
// written in one TransactWriteItems: the instance item on condition of the
// expected version, and a Put per new item. A rebase does not delete
// inside the transaction (a long turn may have more message items than a
// transaction holds): it starts generation gen+1, so the old base and
// messages are named by nothing, and removes them, with the events of the
// turns turn.Apply forgot, after the transaction. That clean-up is best
// effort: an item it fails to remove stays unread. A Load that read the
// instance item before such a commit may find an item gone: it reads the
// instance item again. A commit of more than 50 items is refused with
// ErrTurnCommitTooLarge before any write.
//
// An item whose doc is over BlobThreshold (32 KB) keeps it in S3 when the
// store has Blobs (Turns(blobs); AGENTAUTH_TURN_BUCKET): the object
// turns/<h>/<e>/<sha256 of the doc> is written before the transaction and
// the item holds its key in blob instead of doc; a read refuses a key
// that is not its own instance incarnation's folder and a SHA-256 name
// (ErrCorrupt, the object never read: an item naming another instance's
// object would read it as its own), checks the object's hash against its
// name (missing or changed: ErrCorrupt) and keeps it in a bounded
// per-Store cache. The instance item is offloaded
// the same way. Delete removes the instance's folder; an object a failed
// commit wrote, or one no item names any more, stays until then. Without
// Blobs an item whose doc is over 300 KB (DynamoDB's limit is 400 KB)
// refuses its commit with ErrTurnCommitTooLarge, the instance item
// included (a backlog that grows past it refuses commits).
//
// # Turn statistics
//
// [Store.TurnStats] (turn.TurnStats: the console's turns per hour) keeps
// one TurnHourStats item per UTC hour, keyed by the hour (UTC,
// 2006-01-02T15), whose counters are added to with ADD, and one
// TurnStatsMarker item per turn counted; m is the first 16 bytes, hex, of
// the sha256 of turn.StatsTurnKey (the instance key and the turn id). A
// record is one TransactWriteItems of the marker's Put, on condition
// attribute_not_exists, and the counter's Update: a turn recorded again
// (a redelivery, a retried commit, a second Lambda) fails the condition,
// which cancels the whole transaction, so nothing is added twice and the
// store takes the duplicate as done. Both items carry ttl = the hour's
// start plus turn.StatsRetention (8 days), so DynamoDB removes them; Hours
// reads an hour past retention as zero whether or not its item is gone.
// Records of one hour meet on its counter item: concurrent ones cancel
// each other (TransactionConflict) and try again after a short random
// wait, up to 10 transactions; one hot item takes about 1,000 writes a
// second, far above the turns one deployment ends.
//
// # Tool audit
//
// The audit stream of tool calls ([Store.ToolAudit], domain.ToolAuditLog)
// is one item per record, written once and never changed: pk is
// audit#<listSort>, where listSort is domain.ListKey of the record's time
// (when the call returned) and 16 random hex digits, so two records never
// share an item and the key sorts newest first. doc is the record's JSON
// (content-free: no argument, result or error message is in a
// domain.ToolAudit). The item is in both list indexes, with listKey
// audit#t#<tenant> and listAll audit, so a tenant's records are one
// partition of ListIndex and every tenant's one of ListAllIndex, read
// newest first without a Scan and without an index of their own. ttl is
// the record's time plus the retention (AGENTAUTH_AUDIT_RETENTION):
// DynamoDB removes it within a day or two after that, and a query never
// reads past the retention meanwhile (its range ends at
// domain.ListKeySince of now minus the retention; the item decides too).
// Tool and status are checked on the items read, as a grant's app.
//
// The all-tenants partition takes every tool call, about 1,000 a second
// before DynamoDB throttles it (a throttled index write throttles the
// append, which the audit sink counts and drops, never failing the call).
//
// Times in attributes are RFC 3339 text with nanoseconds, as in doc,
// except the numbers named Unix ms or µs above.
package dynamostore
