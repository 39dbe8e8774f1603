module github.com/agentauth/agentauth

go 1.26

require (
	github.com/aws/aws-lambda-go v1.49.0
	github.com/awslabs/aws-lambda-go-api-proxy v0.16.2
	github.com/chromedp/cdproto v0.0.0-20250403032234-65de8f5d025b
	github.com/chromedp/chromedp v0.13.6
	github.com/coreos/go-oidc/v3 v3.14.1
	go.yaml.in/yaml/v3 v3.0.4
	golang.org/x/oauth2 v0.30.0
	golang.org/x/sync v0.16.0
)

require (
	github.com/chromedp/sysutil v1.1.0 // indirect
	github.com/go-jose/go-jose/v4 v4.0.5 // indirect
	github.com/go-json-experiment/json v0.0.0-20250211171154-1ae217ad3535 // indirect
	github.com/gobwas/httphead v0.1.0 // indirect
	github.com/gobwas/pool v0.2.1 // indirect
	github.com/gobwas/ws v1.4.0 // indirect
	golang.org/x/crypto v0.36.0 // indirect
	golang.org/x/sys v0.31.0 // indirect
)
