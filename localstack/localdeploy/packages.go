package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// MaxPackageBytes is the budget for one function's zip: issue 3 set 10 MiB
// (Lambda itself takes 50 MB zipped by direct upload); issue 19's
// changesets put go-git's object codec in every function (each function
// reads or commits a git bundle), 10.08 MiB as the CDK CLI zips it, so
// 11 MiB, with the account in docs/deploy.md. A tripwire for growth, not a
// limit of Lambda.
const MaxPackageBytes = 11 << 20

// packages prints each function's CodeSize — the size of the zip the CDK
// CLI built from the asset directory and uploaded — and fails over budget.
func packages(ctx context.Context, c *clients, stack string, tpl *template, w io.Writer) error {
	r := &resolver{c: c, tpl: tpl}
	if err := r.loadPhysical(ctx, stack); err != nil {
		return err
	}
	var errs []error
	for _, id := range tpl.logicalIDs("AWS::Lambda::Function") {
		fn := r.physical[id]
		out, err := c.lambda.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(fn)})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		verdict := "ok"
		if out.CodeSize > MaxPackageBytes {
			verdict = "OVER the 11 MiB budget"
			errs = append(errs, fmt.Errorf("%s: package %d bytes > %d", fn, out.CodeSize, MaxPackageBytes))
		}
		fmt.Fprintf(w, "  %-32s %9d bytes (%.2f MB) %s\n", fn, out.CodeSize, float64(out.CodeSize)/(1<<20), verdict)
	}
	return errors.Join(errs...)
}
