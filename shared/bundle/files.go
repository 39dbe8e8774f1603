package bundle

import (
	"path"
	"strings"
)

// IsBundleFile reports whether the slash-separated path, relative to the
// bundle root, is a file the loader reads: a *.yaml or *.yml file with no
// hidden segment (.git, .github/workflows/*.yml, the ..data links of a
// mounted ConfigMap are not bundle resources). LoadDir and a git
// revision's files (shared/changeset) both apply it.
func IsBundleFile(p string) bool {
	if ext := path.Ext(p); ext != ".yaml" && ext != ".yml" {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if strings.HasPrefix(seg, ".") {
			return false
		}
	}
	return true
}
