// Command turn is the turn function: SQS FIFO batches of agent events, fed
// by its event source mapping, run through the turn engine on the AWS
// backends (shared/edge/lambdaentry).
package main

import "github.com/agentauth/agentauth/shared/edge/lambdaentry"

func main() { lambdaentry.Main("turn", lambdaentry.TurnEvents) }
