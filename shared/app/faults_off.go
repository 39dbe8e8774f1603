//go:build !faultinject

package app

// FaultEnv names the crash-injection setting of the test build; a
// production build ignores it (faults_on.go).
const FaultEnv = "AGENTAUTH_FAULT"

// ArmFault does nothing in a production build: crash injection exists
// only in the test build (-tags faultinject, faults_on.go).
func (t *Turns) ArmFault(string) error { return nil }
