// Package aesseal is the embedded domain.Sealer: AES-256-GCM under a local
// keyring whose current key seals and whose older keys still open, so keys
// can rotate without re-encrypting everything at once.
//
// Each sealed value carries the id of its key and is bound to its place of
// storage (domain.Binding.AAD as GCM additional data), so a ciphertext copied
// to another record or field does not open. Keys come from GOONDAN_OAUTH_KEY
// (passed in by the caller) or from <home>/oauth/keys.
//
// This package must never log, print or return a plaintext or a key: its
// errors name bindings, key ids and file paths only, and it never creates a
// new key over a store that already holds records sealed with a lost one.
package aesseal
