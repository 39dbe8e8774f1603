// Package e2eaws is the end-to-end proof of agentauth's AWS deployment: the
// real CDK stack that `make deploy-local` put on the local AWS emulator
// (MiniStack), driven through the emulator's API Gateway data plane
// against the deployed Lambda binaries, with the real OpenID provider
// (test/e2e/provider) and headless Chromium logging in and consenting.
//
// The tests carry the build tag e2eaws and read the deploy's outputs
// (.tools/deploy-local/outputs.json); run them with `make test-e2e-aws`.
// Without outputs (or an emulator) they skip, unless
// AGENTAUTH_REQUIRE_EMULATOR=1.
package e2eaws
