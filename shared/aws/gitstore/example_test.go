package gitstore_test

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentauth/agentauth/shared/aws/awsconfig"
	"github.com/agentauth/agentauth/shared/aws/gitstore"
	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
)

// The composition root builds the clients once and hands them in: the
// bundle "main" keeps its objects under bundles/main/ of the bucket, and
// its head and changeset records in the stack's table.
func ExampleNewRepo() {
	ctx := context.Background()
	cfg, err := awsconfig.LoadDefault(ctx)
	if err != nil {
		log.Fatal(err)
	}
	s3api, db := s3.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg)
	objs, err := gitstore.NewObjects(s3api, "agentauth-bundles", "bundles/main/")
	if err != nil {
		log.Fatal(err)
	}
	repo, err := gitstore.NewRepo(objs, db, "agentauth", "main")
	if err != nil {
		log.Fatal(err)
	}
	recs, err := gitstore.NewRecords(db, "agentauth")
	if err != nil {
		log.Fatal(err)
	}
	m := &changeset.Manager{Repo: repo, Records: recs, Validate: func(files []bundle.File) error {
		_, err := bundle.Parse(files, bundle.Options{})
		return err
	}}
	head, err := repo.Head(ctx)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("active revision %s", changeset.Ref(head))
	_ = m
}
