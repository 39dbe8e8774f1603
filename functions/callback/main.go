// Command callback is the Lambda function behind the public callback
// routes: GET <redirect.callbackPath> of every OAuthApp in the bundle.
// Configuration: see shared/edge/lambdaentry.
package main

import "github.com/agentauth/agentauth/shared/edge/lambdaentry"

func main() { lambdaentry.Main("callback", lambdaentry.CallbackRoutes) }
