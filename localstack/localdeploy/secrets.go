package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// demoSecrets are the values of the example bundle's secrets: the demo
// OpenID provider's client secret, the same one `make run` writes to the
// local secrets directory. Nothing else is ever invented here.
var demoSecrets = map[string]string{
	"demo-oidc": `{"clientSecret":"demo-secret"}`,
}

var secretRefRE = regexp.MustCompile(`ref:\s*Secret/([A-Za-z0-9/_+=.@-]+)`)

// bundleSecretNames lists the Secret/<name> refs of the bundle's YAML files.
func bundleSecretNames(dir string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range secretRefRE.FindAllSubmatch(b, -1) {
			if n := string(m[1]); !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		return nil
	})
	slices.Sort(names)
	return names, err
}

// seedSecrets creates <prefix><name> for each demo secret the bundle
// names and that does not exist yet; an existing secret is left alone, and
// a non-demo secret that is missing is reported (the functions would refuse
// to start without it).
func seedSecrets(ctx context.Context, c *clients, prefix, bundleDir string, w io.Writer) error {
	names, err := bundleSecretNames(bundleDir)
	if err != nil {
		return err
	}
	var missing []string
	for _, n := range names {
		id := prefix + n
		_, err := c.sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(id)})
		var nf *smtypes.ResourceNotFoundException
		switch {
		case err == nil:
			fmt.Fprintf(w, "  exists     secret %s\n", id)
			continue
		case !errors.As(err, &nf):
			return fmt.Errorf("describe secret %s: %w", id, err)
		}
		v, ok := demoSecrets[n]
		if !ok {
			missing = append(missing, id)
			continue
		}
		if _, err := c.sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(id), SecretString: aws.String(v),
			Description: aws.String("agentauth demo bundle secret (local emulator)")}); err != nil {
			return fmt.Errorf("create secret %s: %w", id, err)
		}
		fmt.Fprintf(w, "  created    secret %s (demo value)\n", id)
	}
	if len(missing) > 0 {
		return fmt.Errorf("the bundle names secrets that do not exist and have no demo value: %v (create them, SecretString a JSON object)", missing)
	}
	return nil
}
