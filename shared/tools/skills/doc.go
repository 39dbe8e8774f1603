// Package skills searches the skills an agent may use: the bundle's global
// skills and the skills tenants upload at run time (the seed's skill engine,
// after its scope refactoring).
//
// A search is a pure function of its Query and of the Index it runs on. The
// Index is built once from a plain list of skills and never changes; Search
// reads nothing else: no database, no store, no request. Who may see what is
// decided only by Query.TenantID and Query.AllowedSkillNames:
//
//   - a "global" skill is always a candidate;
//   - a "tenant" skill is a candidate only when its TenantID equals
//     Query.TenantID and its Name is in Query.AllowedSkillNames (exact match);
//     an empty or absent allow list shows no tenant skill at all, and a caller
//     without a tenant sees only global skills.
//
// The caller must take TenantID and AllowedSkillNames from the verified
// claims of the caller's token, never from query parameters, headers or a
// request body: this package trusts them completely, so a value the caller
// chose would let one tenant read another's skills.
//
// Candidates are ranked by BM25F, a field-weighted BM25 (see Search). The
// package must never perform I/O and never consult anything but its Query to
// decide visibility.
package skills
