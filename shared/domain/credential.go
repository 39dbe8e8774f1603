package domain

// RuntimeTokenPrefix begins every runtime token agentauth generates (the
// local server's <home>/runtime-token): the prefix, then 43 base64url
// characters. By it the edge tells a runtime token sent to a route that
// takes an agent JWT, without comparing it with anything.
const RuntimeTokenPrefix = "aat_"
