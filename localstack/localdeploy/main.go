// Command localdeploy finishes and undoes a deploy of the agentauth stack on
// a local AWS emulator (MiniStack), after and around the real CDK CLI:
//
//	localdeploy reapply -stack NAME -template FILE   make the emulator's resources match the template
//	localdeploy seed-secrets -prefix P -bundle DIR [-template FILE]   create the demo secrets the bundle (or the functions) need
//	localdeploy packages -stack NAME -template FILE  each function's package size (at most 11 MiB)
//	localdeploy purge-retained -stack NAME -template FILE   delete what the stack retains (before cdk destroy)
//
// reapply reads the synthesized template and the stack's physical ids, then
// for every property the emulator's CloudFormation is known to drop (table
// TTL, point-in-time recovery and SSE, queue attributes, key rotation, log
// retention, a generated secret's character rules) compares the live
// resource with the template and re-applies the template's value through the
// service API. Properties the emulator keeps but that matter (key policy,
// alarm, route authorization, function architecture) are verified, not
// rewritten. Finally it tells each function where the emulator is
// (AWS_ENDPOINT_URL), which LocalStack injects by itself and MiniStack only
// when it was started with AWS_ENDPOINT_URL set.
//
// It must never weaken a resource, never run against anything but a
// loopback endpoint, and never print a secret value.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "localdeploy:", err)
		os.Exit(1)
	}
}

func usage() error {
	return errors.New("usage: localdeploy reapply|seed-secrets|packages|purge-retained [flags] (see the package doc)")
}

func run(args []string) error {
	if len(args) == 0 {
		return usage()
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	stack := fs.String("stack", "agentauth-local", "CloudFormation stack name")
	template := fs.String("template", "", "synthesized template (cdk.out/<stack>.template.json)")
	prefix := fs.String("prefix", "", "secret name prefix (the stack's SecretPrefix output)")
	bundleDir := fs.String("bundle", "", "bundle directory the functions package")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg, endpoint, err := emulatorConfig(ctx)
	if err != nil {
		return err
	}
	c := newClients(cfg)
	switch args[0] {
	case "reapply":
		if *template == "" {
			return errors.New("reapply: -template is required")
		}
		tpl, err := loadTemplate(*template)
		if err != nil {
			return err
		}
		r := &reconciler{resolver: resolver{c: c, tpl: tpl}, endpoint: endpoint}
		if err := r.load(ctx, *stack); err != nil {
			return err
		}
		r.run(ctx)
		return r.report(os.Stdout)
	case "seed-secrets":
		if *prefix == "" || *bundleDir == "" {
			return errors.New("seed-secrets: -prefix and -bundle are required")
		}
		tpl, err := optionalTemplate(*template)
		if err != nil {
			return err
		}
		return seedSecrets(ctx, c, *prefix, *bundleDir, tpl, os.Stdout)
	case "packages":
		if *template == "" {
			return errors.New("packages: -template is required")
		}
		tpl, err := loadTemplate(*template)
		if err != nil {
			return err
		}
		return packages(ctx, c, *stack, tpl, os.Stdout)
	case "purge-retained":
		if *template == "" {
			return errors.New("purge-retained: -template is required")
		}
		tpl, err := loadTemplate(*template)
		if err != nil {
			return err
		}
		return purgeRetained(ctx, c, *stack, tpl, *prefix, os.Stdout)
	}
	return usage()
}

// optionalTemplate loads the template at path, or is nil when path is "".
func optionalTemplate(path string) (*template, error) {
	if path == "" {
		return nil, nil
	}
	return loadTemplate(path)
}

// emulatorConfig is the SDK configuration for the emulator named by
// AWS_ENDPOINT_URL, which must be a loopback address: this program changes
// resources and must never reach a real account.
func emulatorConfig(ctx context.Context) (aws.Config, string, error) {
	endpoint := os.Getenv("AWS_ENDPOINT_URL")
	if err := requireLoopback(endpoint); err != nil {
		return aws.Config{}, "", err
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion(region),
		config.WithBaseEndpoint(endpoint),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
	)
	return cfg, endpoint, err
}

func requireLoopback(endpoint string) error {
	if endpoint == "" {
		return errors.New("AWS_ENDPOINT_URL is not set: this program only talks to a local emulator")
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("AWS_ENDPOINT_URL %q: %w", endpoint, err)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return nil
	}
	return fmt.Errorf("AWS_ENDPOINT_URL %q is not a loopback address: refusing to change resources there", endpoint)
}
