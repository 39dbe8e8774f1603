// Package gitstore is the AWS changeset backend (shared/changeset's Repo
// and Records ports): the bundle's git objects in S3, its active ref as one
// DynamoDB item moved by compare-and-swap, and the changeset records as
// items of the same table (the stack's dynamostore table).
//
// It must never log an object's or a record's content, nor put one in an
// error: errors name the object key, the bundle or the changeset id and
// what failed, and an SDK error only as awserr describes it. It never
// overwrites or deletes a git object (a write is conditional on the key
// being free), never moves the ref except by a conditional write, and
// never Scans the table.
//
// # Objects
//
// Each git object is one S3 object at
//
//	<prefix>objects/<first 2 hex digits of its hash>/<the other 38>
//
// whose body is git's loose-object format: zlib of "<type> <size>\x00"
// and the content, the bytes git keeps at .git/objects/xx/yyyy (so a
// copy of the folder is a git object directory that git fsck checks). The
// name is git's hash of the type and content (plumbing.ComputeHash),
// computed here, never taken from the caller. A write is a PutObject with
// If-None-Match: * (and the body's SHA-256 for S3 to check): 412, the key
// taken, is success, since a name holds one content; 409, a conditional
// write of the same key in flight, is tried again. A read checks the
// header (a commit, tree, blob or tag of at most MaxObjectBytes), that the
// stream ends where the header says, and that the content hashes to the
// name; anything else is domain.ErrCorrupt. A missing object, or one of
// another type than asked, is plumbing.ErrObjectNotFound.
//
// Objects never change, so Objects keeps those it read or wrote in a
// least-recently-used cache of CacheBytes (32 MiB) of content; an object
// over a quarter of that is remembered as existing, without its content.
// A write of an object the cache knows makes no call. go-git's object
// interface takes no context: every S3 call runs under a deadline of
// CallTimeout (10 s) of its own. IterEncodedObjects and AddAlternate
// answer an error.
//
// Objects a commit wrote but never activated (a lost swap, a rejected
// commit, an abandoned changeset's blobs) stay: nothing here deletes, and
// the bucket must have no lifecycle rule expiring objects under the
// prefix (an object this process remembers would not be written again).
// Reclaiming them needs a mark-and-sweep from the head, not yet written.
//
// # Items
//
// In the table dynamostore.TableSchema describes (partition key pk, no
// sort key, TimeToLive on ttl):
//
//	pk                       kind        other attributes
//	bundle#<name>#head       BundleHead  commit S (40 hex), previous S (the commit it replaced), updatedAt S
//	changeset#<id>           Changeset   version N, doc S, sweepSet S ("changeset"), expiresAt N (Unix ms), ttl N
//
// The head: Head is a strongly consistent GetItem (no item:
// changeset.ErrNoRevision). SwapHead(old, new) is one PutItem on
// condition attribute_not_exists(pk) when old is the zero hash, else
// commit = old; a failed condition is changeset.ErrHeadMoved. The commit
// itself is the compare-and-swap token (a version counter would add
// nothing: equal commits are equal states).
//
// A changeset record: doc is changeset.Changeset's JSON without Version,
// which is the version attribute. Create puts version 1 on condition
// attribute_not_exists(pk) (else changeset.ErrExists); Put puts
// version expect+1 on condition version = expect, and the old item
// DynamoDB returns with a failed condition tells changeset.ErrVersion
// (there is one) from changeset.ErrNotFound (there is none); Get is a
// strongly consistent GetItem; Delete an unconditional DeleteItem. ttl is
// Expires plus Retention (1 h), in epoch seconds, so DynamoDB removes a
// record nobody swept.
//
// # Expiry
//
// Expired answers from a cheap query rather than leaving everything to
// TimeToLive (which would make changeset.Manager.Sweep a no-op and leave
// expired records readable for up to Retention plus DynamoDB's own delay):
// a changeset item carries dynamostore.SweepSetAttribute = SweepSet and
// dynamostore.ExpiresAtAttribute, the keys of the table's existing
// dynamostore.SweepIndex (keys only), where sessions use the other sweep
// sets. Expired queries that partition for expiresAt <= t, oldest first,
// and re-reads each listed item with a strongly consistent GetItem, since
// the index lags the table and an edit may just have extended the
// changeset (one that does not decode is skipped). So no new index, and
// no Scan; TimeToLive removes what no sweep did.
package gitstore
