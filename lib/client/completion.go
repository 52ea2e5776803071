package client

import (
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
)

// Shells for which Completion writes scripts.
var Shells = []string{"bash", "zsh", "fish"}

// Completion returns the shell completion script of app for shell (bash,
// zsh or fish). The bash and zsh scripts ask the program itself for
// candidates: they run the command line typed so far, then the word being
// completed (possibly empty), then --generate-bash-completion, which Run
// answers with the subcommands, flags, or topic and group names from the
// broker that fit. The fish script lists the commands and flags of the app.
func Completion(app *cli.App, shell string) (string, error) {
	name := app.Name
	fn := "_" + nonIdent.ReplaceAllString(name, "_") + "_complete"
	switch shell {
	case "bash":
		return strings.NewReplacer("PROG", name, "FUNC", fn).Replace(bashScript), nil
	case "zsh":
		return strings.NewReplacer("PROG", name, "FUNC", fn).Replace(zshScript), nil
	case "fish":
		app.EnableBashCompletion = true
		return app.ToFishCompletion()
	}
	return "", Usagef("unknown shell %q: want bash, zsh or fish", shell)
}

var nonIdent = regexp.MustCompile(`[^A-Za-z0-9_]`)

// bashScript asks the program for the words that may replace the current
// one after the command line typed so far.
const bashScript = `# bash completion for PROG; load with: source <(PROG completion bash)
FUNC() {
	local cur="${COMP_WORDS[COMP_CWORD]}" words
	words=$("${COMP_WORDS[@]:0:COMP_CWORD}" "$cur" --generate-bash-completion 2>/dev/null)
	COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o bashdefault -o default -F FUNC PROG
`

const zshScript = `#compdef PROG
# zsh completion for PROG; load with: source <(PROG completion zsh)
FUNC() {
	local -a cands
	local cur="${words[CURRENT]}"
	cands=("${(@f)$(${words[1,CURRENT-1]} "$cur" --generate-bash-completion 2>/dev/null)}")
	if [[ -n "${cands[1]}" ]]; then
		compadd -- "${cands[@]}"
	else
		_files
	fi
}
if (( $+functions[compdef] )); then
	compdef FUNC PROG
fi
`
