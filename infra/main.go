// Command infra is the agentauth CDK app: `npx aws-cdk@2.1148.1 synth`
// (cdk.json runs `go run .`). Settings come from CDK context (-c key=value)
// or the environment; see README.md.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentauth/agentauth/infra/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
}

func run() error {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	props, id, err := propsFrom(func(key, env string) string {
		switch v := app.Node().TryGetContext(jsii.String(key)).(type) {
		case string:
			if v != "" {
				return v
			}
		case bool: // "toolhooksSeam": true in cdk.json
			return strconv.FormatBool(v)
		case float64: // "tableIndexes": 3 in cdk.json
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		if env == "" {
			return ""
		}
		return os.Getenv(env)
	})
	if err != nil {
		return err
	}
	if _, err := stack.New(app, id, props); err != nil {
		return err
	}
	app.Synth(nil)
	return nil
}

// propsFrom reads the settings: get(contextKey, envName) returns the
// context value, else the environment's, else "". An empty envName means
// context only.
func propsFrom(get func(key, env string) string) (stack.Props, string, error) {
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	p := stack.Props{
		Prefix:        or(get("prefix", "AGENTAUTH_PREFIX"), "agentauth"),
		AssetDir:      or(get("assetDir", "AGENTAUTH_LAMBDA_DIR"), "../build/lambda"),
		BundlePath:    get("bundlePath", "AGENTAUTH_LAMBDA_BUNDLE_PATH"),
		PublicURL:     get("publicUrl", "AGENTAUTH_PUBLIC_URL"),
		AlarmTopicARN: get("alarmTopicArn", "AGENTAUTH_ALARM_TOPIC_ARN"),
		CallbackPaths: list(get("callbackPaths", "AGENTAUTH_CALLBACK_PATHS")),
		SecretPrefix:  get("secretPrefix", "AGENTAUTH_SECRET_PREFIX"),
	}
	// The tools settings are context only, never the environment: the
	// function reads the same AGENTAUTH_JWKS_URL, AGENTAUTH_TOOLHOOKS_SEAM,
	// … names, and a shell set up for a local agentauth must not change
	// what is deployed (add a function, open the seam routes).
	p.Tools = stack.ToolsProps{
		JWKSURL:     get("jwksUrl", ""),
		JWTIssuer:   get("jwtIssuer", ""),
		JWTAudience: get("jwtAudience", ""),
		TenantClaim: get("tenantClaim", ""),
		SkillsClaim: get("skillsClaim", ""),
		RateLimit:   get("toolRateLimit", ""),
	}
	// The console's settings are context only too.
	p.Console = stack.ConsoleProps{
		Issuer:          strings.TrimRight(get("consoleIssuer", ""), "/"),
		ClientID:        get("consoleClientId", ""),
		ClientSecretRef: get("consoleClientSecretRef", ""),
		RolesClaim:      get("consoleRolesClaim", ""),
	}
	switch v := strings.ToLower(strings.TrimSpace(get("toolhooksSeam", ""))); v {
	case "true", "1":
		p.Tools.Seam = true
	case "", "false", "0":
	default:
		return p, "", fmt.Errorf("toolhooksSeam %q: want true or 1 (seam routes on), false, 0 or unset (off)", v)
	}
	// Turn settings are context only, like the tools settings.
	switch v := strings.ToLower(strings.TrimSpace(get("turns", ""))); v {
	case "true", "1":
		p.Turns.Enabled = true
	case "", "false", "0":
	default:
		return p, "", fmt.Errorf("turns %q: want true or 1 (deploy the turn function), false, 0 or unset (off)", v)
	}
	for key, dst := range map[string]*int{"turnTimeout": &p.Turns.TimeoutSeconds, "turnBatchSize": &p.Turns.BatchSize} {
		if v := strings.TrimSpace(get(key, "")); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return p, "", fmt.Errorf("%s %q: want a whole number", key, v)
			}
			*dst = n
		}
	}
	p.Turns.BedrockModels = list(get("bedrockModels", ""))
	n, err := tableIndexes(get("tableIndexes", ""), get("firstSessionIndexOnly", ""))
	if err != nil {
		return p, "", err
	}
	p.TableIndexes = n
	// The functions read bundle secrets by name under SecretPrefix only;
	// a list of ARNs would grant secrets they never ask for.
	if get("secretArns", "AGENTAUTH_SECRET_ARNS") != "" {
		return p, "", fmt.Errorf("secretArns was replaced by secretPrefix: bundle Secret/<name> reads the secret <secretPrefix><name> (default <prefix>/), and the functions may read exactly the secrets under that prefix")
	}
	switch a := strings.ToLower(or(get("arch", "AGENTAUTH_ARCH"), "arm64")); a {
	case "arm64", "arm_64", "aarch64":
		p.Architecture = awslambda.Architecture_ARM_64()
	case "x86_64", "amd64":
		p.Architecture = awslambda.Architecture_X86_64()
	default:
		return p, "", fmt.Errorf("arch %q: want arm64 or x86_64", a)
	}
	if v := get("logRetentionDays", "AGENTAUTH_LOG_RETENTION_DAYS"); v != "" {
		days, err := strconv.Atoi(v)
		r, ok := retention[days]
		if err != nil || !ok {
			return p, "", fmt.Errorf("logRetentionDays %q: want a period CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)", v)
		}
		p.LogRetention = r
	}
	// The stack's region and account come from the CLI's credentials
	// (CDK_DEFAULT_*); unset, the template is environment-agnostic.
	if acct, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION"); acct != "" && region != "" {
		p.Env = &awscdk.Environment{Account: jsii.String(acct), Region: jsii.String(region)}
	}
	id := or(get("stackName", "AGENTAUTH_STACK_NAME"), "AgentAuth")
	return p, id, nil
}

// tableIndexes reads how many of the table's indexes (in
// stack.TableIndexOrder) to deploy: tableIndexes=N, else all of them.
// firstSessionIndexOnly=true, the older name of tableIndexes=1, stays
// accepted; set with tableIndexes, the two must agree.
func tableIndexes(v, firstOnly string) (int, error) {
	all := len(stack.TableIndexOrder)
	n := 0
	if v = strings.TrimSpace(v); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > all {
			return 0, fmt.Errorf("tableIndexes %q: want 1 to %d, how many of the table's indexes to deploy, in order (%s); unset: all of them",
				v, all, strings.Join(stack.TableIndexOrder, ", "))
		}
	}
	switch f := strings.ToLower(strings.TrimSpace(firstOnly)); f {
	case "true", "1":
		if n > 1 {
			return 0, fmt.Errorf("firstSessionIndexOnly %q and tableIndexes %q disagree: firstSessionIndexOnly=true is tableIndexes=1; set tableIndexes alone", firstOnly, v)
		}
		return 1, nil
	case "", "false", "0":
		if n == 1 && f != "" {
			return 0, fmt.Errorf("firstSessionIndexOnly %q and tableIndexes %q disagree: firstSessionIndexOnly=true is tableIndexes=1; set tableIndexes alone", firstOnly, v)
		}
	default:
		return 0, fmt.Errorf("firstSessionIndexOnly %q: want true or 1 (tableIndexes=1: the first step of adding the session indexes to an older table), false, 0 or unset", firstOnly)
	}
	if n == 0 {
		n = all
	}
	return n, nil
}

// retention maps the periods CloudWatch Logs accepts to CDK's names.
var retention = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
	150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS, 731: awslogs.RetentionDays_TWO_YEARS,
	1096: awslogs.RetentionDays_THREE_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS, 3288: awslogs.RetentionDays_NINE_YEARS,
	3653: awslogs.RetentionDays_TEN_YEARS,
}

func list(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
