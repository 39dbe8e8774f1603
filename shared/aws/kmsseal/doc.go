// Package kmsseal is the AWS domain.Sealer: envelope encryption under an
// AWS KMS key. Each record (one grant, one auth session) gets a data key
// from KMS GenerateDataKey; its secrets are sealed with AES-256-GCM under
// that data key, in the same format as the local sealer (aesseal) and with
// the same additional data (domain.Binding.AAD: record, record id, field),
// and the KMS-wrapped data key is stored beside each ciphertext.
//
// # Encryption context
//
// Every KMS call names the record in its EncryptionContext:
//
//	agentauth:record    b.Record    "grant" | "session"      (always)
//	agentauth:recordId  b.RecordID  "grant-…" | "as-…"       (always)
//	agentauth:app       b.App       "OAuthApp/<name>"         (when not empty)
//	agentauth:subject   b.Subject   the token owner           (when not empty)
//
// KMS refuses to unwrap a data key under any other context, so a value
// copied to another record, app or subject does not open even though
// nothing else checks; the key policy conditions on
// kms:EncryptionContext:agentauth:record. The field is not in the context
// but in the GCM additional data: the fields of one record share one data
// key (a grant write costs one GenerateDataKey, not two) and a value moved
// to another field of the same record fails GCM authentication.
//
// # Caches
//
// A plaintext data key lives only inside a cipher.AEAD: the raw bytes KMS
// returned are zeroed as soon as the AES key schedule is built, and an
// evicted entry drops its AEAD (crypto/aes offers no way to wipe the
// expanded schedule; the garbage collector reclaims it). Two bounded
// in-memory caches hold them:
//
//   - the open cache, keyed by SHA-256 over the KMS key id, the wrapped key
//     and the encryption context (never by the plaintext key), so a warm
//     Open makes no KMS call and a cached key can only ever serve a value
//     with that very wrapped key and context. Entries expire DataKeyTTL
//     (at most 5 minutes) after KMS released the key, whether used or not,
//     and the least recently used are evicted beyond MaxCachedKeys.
//   - the seal cache, keyed by the encryption context, which lets the
//     fields sealed one after another for one record share one data key:
//     an entry serves at most 8 values for at most 5 seconds.
//
// Rewrap (for agentauth keys rewrap) uses KMS ReEncrypt, so the data key
// never leaves KMS; it remembers its results (no secret) for a few seconds
// so the fields of one record again share one new wrapped key.
//
// This package must never log, print or return a plaintext or a data key:
// its errors name the record, field and KMS key id, and a KMS error only as
// awserr describes it (code, status, request id; never its message).
package kmsseal
