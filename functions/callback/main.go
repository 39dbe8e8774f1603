// Command callback is the Lambda function behind the public callback routes:
// GET <redirect.callbackPath> of every OAuthApp in the bundle.
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
	h, err := lambdaentry.Build(context.Background(), lambdaentry.CallbackRoutes, log)
	if err != nil {
		log.Error("callback: cold start failed", "err", err)
		os.Exit(1)
	}
	log.Info("callback: initialized", "initMs", time.Since(start).Milliseconds())
	lambdaentry.Start(h)
}
