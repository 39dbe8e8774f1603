// Package discovery decides which tools a caller may see: the seed's
// GetAgentToolsQuery. Verified JWT claims are matched against the active
// AccessPolicies (all claim matchers of a policy must match; policies are
// OR'ed), which grant ToolGroups; a group's tools are the enabled tools
// matching all of its selectors, plus its explicit tools, minus its
// excluded tools; the result is a deduplicated manifest in tool id order.
//
// An Index is built once from a Config (the bundle's tools, groups and
// policies, plus any tenant-uploaded tools) and precomputes every group's
// tool list, so that resolving one caller is a policy scan and a bitset
// union. Resolve does the whole query; ResolveAccess and GroupTools expose
// its two halves so that a caller can cache them separately. Explain
// answers what Resolve answers and says why — for each tool, the policy
// that granted which group, and whether that group's selectors or its
// explicit tool ids hold it — from what the build recorded as it decided
// each group's tools, so the two never disagree.
//
// Evaluation fails closed: a claim matcher that cannot be evaluated (an
// unknown operator, an invalid regular expression, a claim with no string
// form) does not match, so its policy does not match; a selector pattern
// that does not compile matches no tool. Nothing here panics on any input.
//
// The package is pure: it performs no I/O, reads no clock, keeps no
// package-level mutable state and logs nothing. It must never be the
// place that decides whether the claims are authentic: callers pass only
// claims from a verified token.
package discovery
