package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
)

const completionHelp = `Usage: vllmstat completion bash|zsh|fish

Prints a shell completion script for vllmstat's commands and their flags. Load it with:
  bash:  source <(vllmstat completion bash)        (or save it in /etc/bash_completion.d/)
  zsh:   source <(vllmstat completion zsh)         (after compinit)
  fish:  vllmstat completion fish | source
`

func runCompletion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(stdout, completionHelp)
		return exitOK
	}
	if len(args) != 1 {
		fmt.Fprint(stderr, completionHelp)
		return exitUsage
	}
	cmds := completionCommands(ctx)
	switch args[0] {
	case "bash":
		writeBash(stdout, cmds)
	case "zsh":
		// zsh runs bash completion functions through bashcompinit.
		fmt.Fprintln(stdout, "autoload -U +X bashcompinit && bashcompinit")
		writeBash(stdout, cmds)
	case "fish":
		writeFish(stdout, cmds)
	default:
		fmt.Fprintf(stderr, "vllmstat completion: unknown shell %q: bash, zsh or fish\n", args[0])
		return exitUsage
	}
	return exitOK
}

// completionCommand is a command and its flags, as a completion script offers them.
type completionCommand struct {
	name    string
	summary string
	flags   []string // without dashes
}

// flagLine matches a flag in a command's -h output (the flag package's PrintDefaults).
var flagLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9-]*)`)

// completionCommands lists every command with the flags its own help prints, so that the
// scripts follow the commands as they are, with nothing listed twice by hand.
func completionCommands(ctx context.Context) []completionCommand {
	var out []completionCommand
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		c := completionCommand{name: name, summary: commands[name].summary}
		if name != "completion" {
			var help bytes.Buffer
			helpOf := name
			if name == "record" { // record FILE [run flags]
				helpOf = "run"
			}
			commands[helpOf].run(ctx, []string{"-h"}, &help, io.Discard)
			for _, m := range flagLine.FindAllStringSubmatch(help.String(), -1) {
				if !slices.Contains(c.flags, m[1]) {
					c.flags = append(c.flags, m[1])
				}
			}
		}
		out = append(out, c)
	}
	return out
}

func writeBash(w io.Writer, cmds []completionCommand) {
	var names []string
	for _, c := range cmds {
		names = append(names, c.name)
	}
	fmt.Fprintf(w, `# vllmstat completion for bash
_vllmstat() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W %q -- "$cur"))
        return
    fi
    local flags=""
    case "${COMP_WORDS[1]}" in
`, strings.Join(append(names, "help", "version"), " "))
	for _, c := range cmds {
		if c.name == "completion" {
			fmt.Fprintf(w, "        completion) COMPREPLY=($(compgen -W \"bash zsh fish\" -- \"$cur\")); return ;;\n")
			continue
		}
		var fl []string
		for _, f := range c.flags {
			if len(f) == 1 {
				fl = append(fl, "-"+f)
			} else {
				fl = append(fl, "--"+f)
			}
		}
		fmt.Fprintf(w, "        %s) flags=%q ;;\n", c.name, strings.Join(fl, " "))
	}
	fmt.Fprint(w, `    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -F _vllmstat vllmstat
`)
}

func writeFish(w io.Writer, cmds []completionCommand) {
	fmt.Fprintln(w, "# vllmstat completion for fish")
	fmt.Fprintln(w, "complete -c vllmstat -f -n __fish_use_subcommand -a 'help version' -d 'help, or the version'")
	for _, c := range cmds {
		fmt.Fprintf(w, "complete -c vllmstat -f -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.summary))
		if c.name == "completion" {
			fmt.Fprintln(w, "complete -c vllmstat -f -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'")
		}
		for _, f := range c.flags {
			opt := "-l"
			if len(f) == 1 {
				opt = "-s"
			}
			fmt.Fprintf(w, "complete -c vllmstat -n '__fish_seen_subcommand_from %s' %s %s\n", c.name, opt, f)
		}
	}
}

// fishQuote quotes s for fish: single quotes, with \ and ' escaped.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
