//go:build integration

package sqsqueue

import (
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/deadlettertest"
)

// TestDeadLettersOnEmulator runs the dead letters' suite on a FIFO queue
// and its FIFO dead-letter queue of its own (fifoWithDLQ), deleted at the
// end.
func TestDeadLettersOnEmulator(t *testing.T) {
	api := emulator(t)
	deadlettertest.Run(t, func(t *testing.T) deadlettertest.Env {
		main, dlq := fifoWithDLQ(t, api, 30*time.Second, false)
		dls, err := NewDeadLetters(api, dlq.url, main)
		if err != nil {
			t.Fatal(err)
		}
		return deadlettertest.Env{
			DeadLetters: dls,
			Bury:        func(t *testing.T, e domain.Event) { bury(t, api, dlq.url, e) },
			Queued:      func(t *testing.T) []domain.Event { return takeAll(t, main, emulatorWait) },
		}
	})
}
