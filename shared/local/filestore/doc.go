// Package filestore is the embedded domain.Store: the seed's filesystem
// OAuthStore under <home>/oauth, one JSON file per grant and auth session,
// plus short leases, for running agentauth on a laptop. It is also the
// embedded domain.TenantStore, tenants' run-time uploads under
// <home>/tenants.
//
// Records hold only sealed secrets (domain.EncryptedValue); this package
// never sees a plaintext and never seals or opens anything except in Reseal,
// through the sealer it is given. It must never build a path from an id it
// has not validated, never leave a half-written record (writes are a
// temporary file, fsync and rename), never overwrite or remove a record it
// cannot decode, and never let a conditional write win without holding the
// record's lock, which excludes other goroutines and other processes alike.
//
// Layout under <home>/oauth (directories 0700, files 0600):
//
//	grants/<grantId>.enc.json     OAuthGrantRecord envelope
//	sessions/<sessionId>.enc.json AuthSessionRecord envelope
//	leases/<hash of key>.json     lease key, owner and expiry
//	reuse/<reuseKey>.json         {"sessionId"}: the session that took a
//	                              domain.SessionReuseKey (a pointer that a
//	                              lookup checks against the session)
//	pending/<targetKey>/<sessionId>
//	                              empty: the session is (or was a moment
//	                              ago) pending for the resume target whose
//	                              domain.ResumeTargetKey is targetKey —
//	                              the index ListPendingSessions reads on
//	                              every turn step (see pending.go)
//	list/grants/<scope>/<state>/<b1>/<b2>/<listKey>
//	list/sessions/<scope>/<b1>/<b2>/<listKey>
//	                              empty: the index of the operator lists
//	                              (domain.OperatorQueries), newest first by
//	                              name, per tenant and for every tenant
//	                              (see lists.go)
//	locks/<record>.lock           flock files for conditional writes
//	                              (tenants.lock for every upload write)
//
// The sweep's sets read sessions/ and filter (see index.go).
//
// Layout under <home>/tenants (same modes), plain JSON, nothing sealed:
//
//	<tenant>/<kind>/<name>.json   one upload: tenant, kind, name,
//	                              updatedAt and spec (the upload's JSON
//	                              as a string, kept byte for byte)
//	revision.json                 {"revision": N}, one more per write
//
// <tenant> and <name> are escaped (see fileSafe) so that no two map to one
// file even where file names ignore case, and none is special anywhere;
// <kind> is Skill or Tool. A write changes the upload and then the
// revision, both under locks/tenants.lock.
package filestore
