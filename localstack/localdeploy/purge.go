package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// purgeRetained deletes the resources the stack keeps on delete
// (DeletionPolicy Retain: the table, the key, the session-keys secret, the
// turn bucket with its objects) and
// the seeded demo secrets, so that the emulator is left clean and the next
// deploy can create them under the same names. It runs before cdk destroy,
// while the stack still maps logical ids to physical ones. Local emulator
// only: on AWS these resources are retained on purpose.
func purgeRetained(ctx context.Context, c *clients, stack string, tpl *template, prefix string, w io.Writer) error {
	r := &resolver{c: c, tpl: tpl}
	if err := r.loadPhysical(ctx, stack); err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			fmt.Fprintf(w, "  stack %s does not exist: nothing to purge\n", stack)
			return nil
		}
		return err
	}
	var errs []error
	for _, id := range sortedResourceIDs(tpl) {
		res := tpl.Resources[id]
		if res.DeletionPolicy != "Retain" {
			continue
		}
		p := r.physical[id]
		var err error
		switch res.Type {
		case "AWS::DynamoDB::Table":
			if _, err = c.ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(p), DeletionProtectionEnabled: aws.Bool(false)}); err == nil {
				_, err = c.ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(p)})
			}
			var nf *ddbtypes.ResourceNotFoundException
			if errors.As(err, &nf) {
				err = nil
			}
		case "AWS::KMS::Key":
			_, err = c.kms.ScheduleKeyDeletion(ctx, &kms.ScheduleKeyDeletionInput{KeyId: aws.String(p), PendingWindowInDays: aws.Int32(7)})
		case "AWS::SecretsManager::Secret":
			err = deleteSecret(ctx, c, p)
		case "AWS::S3::Bucket":
			err = deleteBucket(ctx, c, p)
		default:
			fmt.Fprintf(w, "  left       %s %s (no purge rule)\n", res.Type, p)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", res.Type, p, err))
			continue
		}
		fmt.Fprintf(w, "  deleted    %s %s\n", res.Type, p)
	}
	if prefix != "" {
		for n := range demoSecrets {
			if err := deleteSecret(ctx, c, prefix+n); err != nil {
				errs = append(errs, err)
			} else {
				fmt.Fprintf(w, "  deleted    demo secret %s\n", prefix+n)
			}
		}
	}
	return errors.Join(errs...)
}

func deleteSecret(ctx context.Context, c *clients, id string) error {
	_, err := c.sm.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String(id), ForceDeleteWithoutRecovery: aws.Bool(true)})
	var nf *smtypes.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil
	}
	return err
}

// deleteBucket empties the bucket (pages of up to 1000 objects) and
// deletes it; a bucket already gone is not an error.
func deleteBucket(ctx context.Context, c *clients, name string) error {
	for page := 0; page < 10000; page++ {
		out, err := c.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(name)})
		var nb *s3types.NoSuchBucket
		if errors.As(err, &nb) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(out.Contents) == 0 {
			break
		}
		ids := make([]s3types.ObjectIdentifier, 0, len(out.Contents))
		for _, o := range out.Contents {
			ids = append(ids, s3types.ObjectIdentifier{Key: o.Key})
		}
		if _, err := c.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(name), Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
			return err
		}
	}
	_, err := c.s3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	return err
}

func sortedResourceIDs(t *template) []string {
	var ids []string
	for _, typ := range []string{"AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::SecretsManager::Secret", "AWS::KMS::Key"} {
		ids = append(ids, t.logicalIDs(typ)...)
	}
	return ids
}
