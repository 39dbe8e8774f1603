// Command gettoken is the Lambda function behind the IAM-authorized runtime
// routes: POST /v1/oauth/token, GET /v1/oauth/sessions/{id},
// POST /v1/oauth/revoke, GET /v1/oauth/pending. Configuration: see
// shared/edge/lambdaentry.
package main

import "github.com/agentauth/agentauth/shared/edge/lambdaentry"

func main() { lambdaentry.Main("gettoken", lambdaentry.RuntimeRoutes) }
