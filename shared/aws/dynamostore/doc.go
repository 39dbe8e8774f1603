// Package dynamostore is the AWS domain.Store: sealed grants, auth sessions
// and refresh leases in one DynamoDB table, shared by every Lambda. It is
// also the AWS domain.TenantStore: tenants' run-time uploads, plain JSON,
// in the same table; and, as ToolLimiter, the state of the tools'
// per-(principal, tool) rate limit (the algorithm is shared/tools/ratelimit).
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
// on-demand billing, TimeToLive on [TTLAttribute] ("ttl"); [TableSchema] and
// [TimeToLiveSpec] give the requests that create it. Items:
//
//	pk                               kind               other attributes
//	grant#<grantId>                  OAuthGrantRecord   version N, createdAt S, doc S
//	session#<sessionId>              AuthSessionRecord  version N, status S, completedAt S (once set), ttl N (see below), doc S
//	lease#<sha256 hex(key)>          Lease              owner S, expiresAt N (Unix ms), ttl N
//	tenantres#<tenant>#<kind>#<name> TenantResource     tenant S, resourceKind S (Skill or Tool), name S, spec S, updatedAt S
//	tenantrev                        TenantRevision     revision N
//	ratelimit#<ratelimit.Key>        RateLimit          tat N (Unix µs), ttl N
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
// Times in attributes are RFC 3339 text with nanoseconds, as in doc.
package dynamostore
