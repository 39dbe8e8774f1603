// Package bundle loads and validates the configuration bundle: a directory
// of YAML resources (apiVersion agents.example.io/v1alpha1, kind,
// metadata, spec), several documents per file allowed. It checks the bundle
// as a whole, resolves each ValueSource (literal, environment variable or
// secret reference) and returns a Bundle that the rest of agentauth trusts
// without checking again, together with the bundle revision (a content
// hash) and any warnings.
//
// Every problem names the file, line, resource and field path, and all
// problems of a bundle are reported together (see ValidationError), so an
// operator fixes a broken bundle in one pass; a bundle with any problem is
// refused as a whole.
//
// Kinds are decoded through a small registry: OAuthApp, Tool, ToolGroup,
// AccessPolicy and Skill, and the turn engine's Model, Agent, Swarm and
// Connector (their fields are documented on the types of the same names).
// Unknown kinds and unknown fields are errors, never ignored. References
// between resources (a tool's OAuthApp and scopes, a policy's groups, a
// group's tools, an agent's model, a swarm's agents) are checked once
// every file is read.
//
// The package must never put a resolved secret value (client secret, any
// value read from the environment or a secret store) into an error, a
// warning or a log line: messages name the field, the environment variable
// or the secret reference, never the value. It performs no network I/O and
// reads only the files and secrets it is pointed at; it keeps no
// package-level mutable state.
package bundle
