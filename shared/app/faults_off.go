//go:build !faultinject

package app

// ArmFault does nothing in a production build: crash injection exists
// only in the test build (-tags faultinject, faults_on.go).
func (t *Turns) ArmFault(string) error { return nil }
