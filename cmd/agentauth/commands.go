package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/agentauth/agentauth/shared/config"
)

// command is one of agentauth's commands. Its usage — the synopsis in the
// command list, its --help — is made from its flags, so a flag cannot be
// left out of it.
type command struct {
	// name is what selects it: "serve", "instances list".
	name string
	// args names what follows the flags: "" for nothing, else one
	// argument (`"text"`), which argsAbout says what it is.
	args, argsAbout string
	// required flags are shown without brackets and checked before run.
	required []string
	summary  string // one line, for the command list
	about    string // what --help adds, in paragraphs
	// env: its flags' defaults come from the environment (localConfig);
	// a bad environment fails it once its flags are read.
	env bool
	// bind declares the command's flags on fs, with their defaults from
	// cfg, and returns what runs once they are parsed.
	bind func(fs *flag.FlagSet, cfg *config.Config) action
}

// action runs a command with its positional arguments.
type action func(ctx context.Context, std stdio, args []string) error

// stdio is a command's standard streams.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// section is a heading of the command list and what it covers.
type section struct {
	title string
	names []string
}

// sections order the command list; every command is in one.
var sections = []section{
	{"The local server and its home (--home DIR; default $AGENTAUTH_HOME, else ./.agentauth):",
		[]string{"serve", "runtime-token", "grants list", "events list", "sessions cleanup", "keys rotate", "keys reseal", "keys generate", "keys rewrap"}},
	{"Agent instances, over a running serve's HTTP API (--url URL, default http://127.0.0.1:8080, with the home's runtime token: $AGENTAUTH_RUNTIME_TOKEN, else <home>/runtime-token):",
		[]string{"send", "instances list", "instances inspect", "instances events", "instances pause", "instances resume", "instances terminate", "instances delete"}},
	{"Dead letters, the events that failed every delivery attempt (--home DIR; with $AGENTAUTH_TABLE set, the AWS deployment the environment names):",
		[]string{"instances dead-letters", "instances redrive"}},
	{"The bundle's history, when the bundle is a git repository (--bundle DIR; import and revert check the result with the secrets of --home DIR; docs/changesets.md):",
		[]string{"bundle init", "bundle import", "bundle log", "bundle show", "bundle diff", "bundle revert", "bundle export"}},
	{"Upgrading the AWS deployment the functions' variables name ($AGENTAUTH_TABLE and the others; docs/deploy.md):",
		[]string{"admin backfill-list-index"}},
	{"Other:", []string{"bench", "scripted-model", "version"}},
}

// sharedFlags are named once per section of the command list, not on
// every line of it (each command's --help has them).
var sharedFlags = []string{"home", "url"}

// commandList is what `agentauth --help` prints.
func commandList(cmds []command) string {
	var b strings.Builder
	b.WriteString("agentauth — the auth and tool plane for AI agents: local server and admin CLI\n\n")
	b.WriteString("usage: agentauth <command> [flags]\n       agentauth <command> --help      what it does, and every flag\n")
	for _, s := range sections {
		b.WriteString("\n" + wrap(s.title, 0, 0))
		for _, n := range s.names {
			if c, ok := lookup(cmds, n); ok { // TestUsageTexts: every name is one
				b.WriteString(c.usageLine("  ", false))
				b.WriteString(wrap(c.summary, 6, 6))
			}
		}
	}
	b.WriteString("\n" + wrap("The bundle defaults to $AGENTAUTH_BUNDLE, else ./examples/bundle. README.md has the walkthroughs, docs/configuration.md every variable.", 0, 0))
	return b.String()
}

// groupList is the command list of one group ("instances").
func groupList(cmds []command, group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: agentauth %s <command> [flags]\n       agentauth %s <command> --help   what it does, and every flag\n\n", group, group)
	for _, c := range cmds {
		if g, _, ok := strings.Cut(c.name, " "); ok && g == group {
			b.WriteString(c.usageLine("  ", false))
			b.WriteString(wrap(c.summary, 6, 6))
		}
	}
	return b.String()
}

// flags binds the command's flags on a fresh set (cfg: their defaults).
func (c command) flags(cfg *config.Config) (*flag.FlagSet, action) {
	fs := newFlags(c.name)
	act := c.bind(fs, cfg)
	return fs, act
}

// flagRanks order the flags in usages: the instance first, then what
// else a command takes, the shared flags last. A flag not listed comes
// before the shared ones.
var flagRanks = []string{"swarm", "instance", "agent", "turn", "follow", "reason", "user", "claims", "auth-file",
	"bundle", "addr", "public-url", "log-level", "debug-addr", "json", "n", "to-key", "duration", "concurrency", "max-requests",
	"home", "url"}

// flagOrder is the command's flags in the order its usage shows them.
func (c command) flagOrder(fs *flag.FlagSet) []*flag.Flag {
	var out []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { out = append(out, f) })
	rank := func(f *flag.Flag) int {
		if i := slices.Index(flagRanks, f.Name); i >= 0 {
			return i
		}
		return len(flagRanks) - len(sharedFlags)
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

// synopsis is the command's flags and arguments; all: with the shared
// flags too.
func (c command) synopsis(all bool) string { return strings.Join(c.synopsisWords(all), " ") }

// usageLine is "agentauth <name> <synopsis>", wrapped after prefix.
func (c command) usageLine(prefix string, all bool) string {
	words := append([]string{"agentauth", c.name}, c.synopsisWords(all)...)
	if i := strings.IndexByte(c.name, ' '); i >= 0 {
		words = append([]string{"agentauth", c.name[:i], c.name[i+1:]}, c.synopsisWords(all)...)
	}
	return wrapWords(prefix, words, utf8.RuneCountInString(prefix+"agentauth "+c.name+" "))
}

// synopsisWords are the synopsis's words: "--swarm SWARM", "[--json]".
func (c command) synopsisWords(all bool) []string {
	fs, _ := c.flags(&config.Config{})
	var parts []string
	for _, f := range c.flagOrder(fs) {
		if !all && slices.Contains(sharedFlags, f.Name) {
			continue
		}
		s := "--" + f.Name
		if name, _ := flagDoc(f); name != "" {
			s += " " + name
		}
		if !slices.Contains(c.required, f.Name) {
			s = "[" + s + "]"
		}
		parts = append(parts, s)
	}
	if c.args != "" {
		parts = append(parts, c.args)
	}
	return parts
}

// help is the command's --help: synopsis, what it does, every flag.
func (c command) help(cfg *config.Config) string {
	var b strings.Builder
	b.WriteString(c.usageLine("usage: ", true))
	b.WriteString("\n" + wrap(capitalize(c.summary)+".", 0, 0))
	for _, p := range paragraphs(c.about) {
		b.WriteString("\n" + wrap(p, 0, 0))
	}
	fs, _ := c.flags(cfg)
	order := c.flagOrder(fs)
	if len(order) == 0 {
		return b.String()
	}
	b.WriteString("\nflags:\n")
	width := 0
	heads := make([]string, len(order))
	for i, f := range order {
		name, _ := flagDoc(f)
		heads[i] = "--" + f.Name
		if name != "" {
			heads[i] += " " + name
		}
		width = max(width, len(heads[i]))
	}
	for i, f := range order {
		_, text := flagDoc(f)
		if slices.Contains(c.required, f.Name) {
			text += " (required)"
		} else if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			text += " (default " + f.DefValue + ")"
		}
		b.WriteString(wrapAfter("  "+heads[i]+strings.Repeat(" ", width-len(heads[i])+2), text, width+4))
	}
	return b.String()
}

// flagDoc is a flag's argument name and what it is: a usage that starts
// with its back-quoted name ("`KEY` the instance key") is shown as
// "--instance KEY  the instance key", one that holds it
// ("the `HOST:PORT` to listen on") with the name in place.
func flagDoc(f *flag.Flag) (name, text string) {
	name, text = flag.UnquoteUsage(f)
	if rest, ok := strings.CutPrefix(f.Usage, "`"+name+"` "); ok && name != "" {
		text = rest
	}
	return name, text
}

// brief is what a usage error prints under the error: the synopsis and
// where the rest is.
func (c command) brief() string {
	return c.usageLine("usage: ", true) +
		"run 'agentauth " + c.name + " --help' for what each flag does\n"
}

// execute reads the command's flags and runs it. --help (-h) prints its
// usage to stdout and runs nothing.
func (c command) execute(ctx context.Context, args []string, std stdio) error {
	var cfg config.Config
	var cfgErr error
	if c.env {
		cfg, cfgErr = localConfig()
	}
	defaults := cfg // the help shows these, not what the flags before -h set
	fs, act := c.flags(&cfg)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, werr := io.WriteString(std.out, c.help(&defaults))
			return werr
		}
		return c.usageError("%s: %v", c.name, err)
	}
	if cfgErr != nil {
		return cfgErr
	}
	switch {
	case c.args == "" && fs.NArg() > 0:
		return c.usageError("%s: unexpected argument %q", c.name, fs.Arg(0))
	case c.args != "" && fs.NArg() != 1:
		return c.usageError("%s: want %s as one argument, after the flags", c.name, c.argsAbout)
	}
	var missing []string
	for _, n := range c.required {
		if fs.Lookup(n).Value.String() == "" {
			missing = append(missing, "--"+n)
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		return c.usageError("%s: %s is required", c.name, missing[0])
	default:
		return c.usageError("%s: %s and %s are required", c.name, strings.Join(missing[:len(missing)-1], ", "), missing[len(missing)-1])
	}
	err := act(ctx, std, fs.Args())
	var ue usageError
	if errors.As(err, &ue) && ue.usage == "" {
		ue.usage = c.brief()
		return ue
	}
	return err
}

func (c command) usageError(format string, a ...any) usageError {
	return usageError{msg: fmt.Sprintf(format, a...), usage: c.brief()}
}

// helpArg reports whether a is a request for help.
func helpArg(a string) bool {
	return a == "-h" || a == "--help" || a == "-help" || a == "help"
}

// dispatch finds the command args name and runs it; a group's name alone
// ("instances") is a usage error listing its commands, and with --help
// prints that list.
func dispatch(ctx context.Context, cmds []command, args []string, std stdio) error {
	if len(args) == 0 {
		return usageError{msg: "no command", usage: commandList(cmds)}
	}
	switch {
	case helpArg(args[0]) && (len(args) == 1 || helpArg(args[1])):
		_, err := io.WriteString(std.out, commandList(cmds))
		return err
	case helpArg(args[0]):
		// help <command>: that command's --help.
		return dispatch(ctx, cmds, append(slices.Clone(args[1:]), "--help"), std)
	case args[0] == "--version" || args[0] == "-version":
		args = append([]string{"version"}, args[1:]...)
	}
	if len(args) > 1 {
		if c, ok := lookup(cmds, args[0]+" "+args[1]); ok {
			return c.execute(ctx, args[2:], std)
		}
	}
	if c, ok := lookup(cmds, args[0]); ok {
		return c.execute(ctx, args[1:], std)
	}
	var verbs []string
	for _, c := range cmds {
		if g, v, ok := strings.Cut(c.name, " "); ok && g == args[0] {
			verbs = append(verbs, v)
		}
	}
	switch {
	case len(verbs) == 0:
		return usageError{msg: fmt.Sprintf("unknown command %q", args[0]), usage: "run 'agentauth --help' for the commands\n"}
	case len(args) == 1:
		return usageError{msg: fmt.Sprintf("%s: missing command: %s", args[0], strings.Join(verbs, ", ")), usage: groupList(cmds, args[0])}
	case helpArg(args[1]):
		_, err := io.WriteString(std.out, groupList(cmds, args[0]))
		return err
	}
	return usageError{msg: fmt.Sprintf("unknown command %q (%s has %s)", args[0]+" "+args[1], args[0], strings.Join(verbs, ", ")), usage: groupList(cmds, args[0])}
}

func lookup(cmds []command, name string) (command, bool) {
	for _, c := range cmds {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usageWidth is where usage lines wrap.
const usageWidth = 80

// wrap breaks s at spaces so that no line passes usageWidth: the first
// line indented by first, the rest by rest. Explicit newlines are kept.
func wrap(s string, first, rest int) string {
	return wrapAfter(strings.Repeat(" ", first), s, rest)
}

// wrapAfter is wrap with the first line starting with prefix as it is.
func wrapAfter(prefix, s string, rest int) string {
	var b strings.Builder
	for i, para := range strings.Split(s, "\n") {
		p := prefix
		if i > 0 {
			p = strings.Repeat(" ", rest)
		}
		b.WriteString(wrapWords(p, strings.Fields(para), rest))
	}
	return b.String()
}

// wrapWords writes words after prefix, breaking lines between them (a
// word may hold spaces: "[--turn ID]") so that none passes usageWidth
// unless one word does; each line after the first is indented by rest.
func wrapWords(prefix string, words []string, rest int) string {
	var b strings.Builder
	line, empty := prefix, true
	for _, w := range words {
		if !empty && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) > usageWidth {
			b.WriteString(line + "\n")
			line, empty = strings.Repeat(" ", rest), true
		}
		if !empty {
			line += " "
		}
		line += w
		empty = false
	}
	b.WriteString(line + "\n")
	return b.String()
}

// paragraphs splits s at its blank lines, each paragraph on one line.
func paragraphs(s string) []string {
	var out []string
	var cur []string
	for _, line := range append(strings.Split(s, "\n"), "") {
		if strings.TrimSpace(line) == "" {
			if len(cur) > 0 {
				out = append(out, strings.Join(cur, " "))
				cur = nil
			}
			continue
		}
		cur = append(cur, strings.Fields(line)...)
	}
	return out
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// commands are every command of agentauth.
func commands() []command {
	var out []command
	out = append(out, serveCommands()...)
	out = append(out, homeCommands()...)
	out = append(out, sendCommand())
	out = append(out, instanceCommands()...)
	out = append(out, deadLetterCommands()...)
	out = append(out, bundleCommands()...)
	out = append(out, adminCommands()...)
	out = append(out, benchCommand(), versionCommand())
	return out
}
