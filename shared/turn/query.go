package turn

import "context"

// InstanceQuery selects one page of agent instances for an operator.
type InstanceQuery struct {
	Swarm  string         // "" any
	Agent  string         // "" any
	Status InstanceStatus // "" any
	After  string         // the previous page's Next; "" the first page
	Limit  int            // 1..100 (0: 50)
}

// InstancePage is one page of an InstanceQuery.
type InstancePage struct {
	Instances  []Instance
	Next       string // "" on the last page; opaque, safe in a URL query
	Unreadable []Unreadable
}

// InstanceQuerier is a Store that pages through its instances with an
// index: most recently created first (Instance.CreatedAt, then the
// store's id for the instance), a swarm's instances read from that
// swarm's part of the index. What a page costs follows the page (and,
// with Agent or Status, the instances examined to fill it, bounded per
// page: such a page may hold fewer than Limit with a Next to go on
// from), never how many instances the store holds. Both stores implement
// it (local/turnfile, aws/dynamostore's Store.Turns).
type InstanceQuerier interface {
	QueryInstances(ctx context.Context, q InstanceQuery) (InstancePage, error)
}
