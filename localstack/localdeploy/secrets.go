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
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// demoSecrets are the values of the demo secrets: the example bundle's
// client secret at the demo OpenID provider, the same one `make run` writes
// to the local secrets directory, and the console's client secret there
// (agentauth-console, for deploy-local's -c consoleClientSecretRef).
// Nothing else is ever invented here.
var demoSecrets = map[string]string{
	"demo-oidc":    `{"clientSecret":"demo-secret"}`,
	"console-oidc": `{"clientSecret":"console-secret"}`,
}

// secretRefEnv are the function environment variables that name a secret
// as <name>/<key> (the console's client secret, read at a cold start).
var secretRefEnv = []string{"AGENTAUTH_CONSOLE_CLIENT_SECRET_REF"}

// templateSecretNames lists the secret names the template's functions
// read by reference from their environment (secretRefEnv).
func templateSecretNames(tpl *template) []string {
	var names []string
	for _, id := range tpl.logicalIDs("AWS::Lambda::Function") {
		env, _ := tpl.Resources[id].Properties["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		for _, k := range secretRefEnv {
			ref, _ := vars[k].(string)
			if n, _, ok := strings.Cut(ref, "/"); ok && n != "" && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return names
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
// names, or the template's functions name (when tpl is not nil), and that
// does not exist yet; an existing secret is left alone, and
// a non-demo secret that is missing is reported (the functions would refuse
// to start without it).
func seedSecrets(ctx context.Context, c *clients, prefix, bundleDir string, tpl *template, w io.Writer) error {
	names, err := bundleSecretNames(bundleDir)
	if err != nil {
		return err
	}
	if tpl != nil {
		for _, n := range templateSecretNames(tpl) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
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
		return fmt.Errorf("the bundle or the functions name secrets that do not exist and have no demo value: %v (create them, SecretString a JSON object)", missing)
	}
	return nil
}
