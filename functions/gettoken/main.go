// Command gettoken is the Lambda function behind the IAM-authorized runtime
// routes: POST /v1/oauth/token, GET /v1/oauth/sessions/{id},
// POST /v1/oauth/revoke, GET /v1/oauth/pending.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/agentauth/agentauth/shared/lambdaentry"
	"github.com/agentauth/agentauth/shared/logging"
)

func main() {
	start := time.Now()
	log := logging.New(os.Stdout, slog.LevelInfo)
	h, err := lambdaentry.Build(context.Background(), lambdaentry.RuntimeRoutes, log)
	if err != nil {
		log.Error("gettoken: cold start failed", "err", err)
		os.Exit(1)
	}
	log.Info("gettoken: initialized", "initMs", time.Since(start).Milliseconds())
	lambdaentry.Start(h)
}
