// Package listtree walks the local list indexes: trees of empty files
//
//	<root>/<b1>/<b2>/<listKey>
//
// where listKey is domain.ListKey (most recently created first in name
// order) and b1 and b2 bucket it by its first 6 and next 4 digits, so a
// page reads the buckets it passes and the entries it lists, never the
// whole tree. The file store's operator lists (local/filestore) and the
// instance list (local/turnfile) are such trees.
//
// This package only reads: it must never write, lock or remove a file,
// and it never opens an entry (entries are empty; their names are the
// index).
package listtree

import (
	"errors"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentauth/agentauth/shared/domain"
)

// Walk yields the keys of the tree at root after after ("": from the
// start) and before end ("": to the end), in order, reading only the
// buckets that can hold them. A name that is not a list key, or whose id
// keep rejects (keep nil: every id), is a stray file and is skipped.
func Walk(root, after, end string, keep func(id string) bool) iter.Seq2[string, error] {
	prefix := func(k string, n int) string {
		if k == "" {
			return ""
		}
		return k[:n]
	}
	a1, a2, e1, e2 := prefix(after, 6), prefix(after, 10), prefix(end, 6), prefix(end, 10)
	return func(yield func(string, error) bool) {
		l1, err := sortedNames(root)
		if err != nil {
			yield("", err)
			return
		}
		for _, b1 := range l1 {
			if len(b1) != 6 || !allDigits(b1) || b1 < a1 {
				continue
			}
			if e1 != "" && b1 > e1 {
				return
			}
			l2, err := sortedNames(filepath.Join(root, b1))
			if err != nil {
				yield("", err)
				return
			}
			for _, b2 := range l2 {
				if len(b2) != 4 || !allDigits(b2) || b1+b2 < a2 {
					continue
				}
				if e2 != "" && b1+b2 > e2 {
					return
				}
				names, err := sortedNames(filepath.Join(root, b1, b2))
				if err != nil {
					yield("", err)
					return
				}
				for _, k := range names {
					if k <= after || !strings.HasPrefix(k, b1+b2) {
						continue
					}
					if _, id, err := domain.ParseListKey(k); err != nil || keep != nil && !keep(id) {
						continue // a stray file
					}
					if end != "" && k >= end {
						return
					}
					if !yield(k, nil) {
						return
					}
				}
			}
		}
	}
}

// sortedNames lists dir's names in order; none when dir does not exist.
func sortedNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
