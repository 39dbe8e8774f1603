package domain

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Paging of the operator lists (OperatorQueries, turn.InstanceQuerier):
// one definition of the page size and of the list key every store sorts
// by and hands out as a page's Next.

// Page sizes of the operator lists.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 100
)

// PageLimit is the page size a query's Limit asks for: 0 is
// DefaultPageLimit; anything outside 1..MaxPageLimit is ErrInvalidID.
func PageLimit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultPageLimit, nil
	case n < 0 || n > MaxPageLimit:
		return 0, fmt.Errorf("%w: page limit %d is not within 1..%d", ErrInvalidID, n, MaxPageLimit)
	}
	return n, nil
}

// listKeyDigits is the width of a list key's time part: math.MaxInt64 in
// decimal.
const listKeyDigits = 19

// ListKey is the key a record created at createdAt with id sorts by in
// the operator lists: the creation time inverted (math.MaxInt64 minus
// Unix nanoseconds, 19 digits, so that ascending byte order is newest
// first), '.', and id (which breaks ties). A time before 1970 sorts as
// 1970. It is what a page's Next holds (the last record the page
// examined), and safe in a URL query and a file name for ids of
// [A-Za-z0-9_-].
func ListKey(createdAt time.Time, id string) string {
	ns := int64(0)
	if createdAt.After(time.Unix(0, 0)) {
		ns = createdAt.UnixNano()
	}
	return fmt.Sprintf("%0*d.%s", listKeyDigits, int64(math.MaxInt64)-ns, id)
}

// ListKeySince bounds the list keys of the records created at or after
// t: exactly those sort before it ('/' follows '.').
func ListKeySince(t time.Time) string {
	k := ListKey(t, "")
	return k[:listKeyDigits] + "/"
}

// ParseListKey splits a list key, as a page's After gives it back, into
// its time part and id; ErrInvalidID when it is not one ListKey makes.
// Stores call it before a cursor reaches a key or a path.
func ParseListKey(k string) (inverted string, id string, err error) {
	bad := func() (string, string, error) {
		return "", "", fmt.Errorf("%w: not a page cursor", ErrInvalidID)
	}
	if len(k) < listKeyDigits+2 || len(k) > listKeyDigits+1+128 || k[listKeyDigits] != '.' {
		return bad()
	}
	if _, err := strconv.ParseUint(k[:listKeyDigits], 10, 64); err != nil {
		return bad()
	}
	for i := listKeyDigits + 1; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return bad()
		}
	}
	return k[:listKeyDigits], k[listKeyDigits+1:], nil
}
