package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/agentauth/agentauth/shared/config"
)

// version is the release a build names itself, set by the linker:
//
//	go build -ldflags "-X main.version=v1.4.0" ./cmd/agentauth
//
// Empty, the module version Go stamps into the build is shown instead
// (a pseudo-version from the git checkout, or "(devel)"). serve shows it
// on GET / too.
var version string

func versionCommand() command {
	return command{name: "version", summary: "print agentauth's version, the commit it was built from and the Go version",
		about: `The version is the one the build was given (go build -ldflags "-X main.version=v1.4.0"), else the
			module version Go stamped from the git checkout. The commit is the checkout's (vcs.revision),
			"+ local changes" when it had uncommitted ones; unknown when Go stamped none (go run, go test,
			-buildvcs=false, a git worktree, no checkout).`,
		bind: func(*flag.FlagSet, *config.Config) action {
			return func(_ context.Context, std stdio, _ []string) error {
				bi, _ := debug.ReadBuildInfo()
				return printVersion(std.out, version, bi)
			}
		}}
}

// printVersion writes what `agentauth version` says: the version, the
// commit (with its time, and whether the tree held changes) and the Go
// release and platform.
func printVersion(w io.Writer, v string, bi *debug.BuildInfo) error {
	commit, at, modified := "unknown (the build has no vcs.revision)", "", false
	if bi != nil {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if at != "" {
		commit += " (" + at + ")"
	}
	if modified {
		commit += " + local changes"
	}
	_, err := fmt.Fprintf(w, "agentauth %s\ncommit    %s\ngo        %s %s/%s\n", v, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
