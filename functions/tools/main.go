// Command tools is the Lambda function behind the JWT-checked tool routes:
// GET /v1/agents/tools, GET /v1/agents/skills, POST /v1/tools/invoke, the
// tenant upload routes under /v1/admin/tenants/{tenant}/, and (with
// AGENTAUTH_TOOLHOOKS_SEAM=1) the RFC 0064 seam. Configuration: see
// shared/edge/lambdaentry and shared/edge/toolsapi.
package main

import "github.com/agentauth/agentauth/shared/edge/lambdaentry"

func main() { lambdaentry.Main("tools", lambdaentry.ToolsRoutes) }
