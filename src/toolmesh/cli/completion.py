"""``toolmesh completion bash|zsh|fish``: a shell completion script, generated from the parser
tree so it completes exactly the commands and options the parsers take.

The scripts share one design: a walk over the words typed so far finds the command they
name (``toolmesh config put``), skipping options and the values of those that take one; then
the word under the cursor completes to that command's options (when it starts with ``-``),
or its subcommands and positional choices, or files. The per-command tables are generated
here; the walk is written once per shell.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolmesh.cli.parser import CommandsAction

SHELLS = ("bash", "zsh", "fish")

INSTALL = """\
Print a script that completes toolmesh's commands, options and run parts on Tab.

Install it once, then open a new shell:
  bash:  toolmesh completion bash > ~/.local/share/bash-completion/completions/toolmesh
         (with the bash-completion package; without it, add this line to ~/.bashrc:
          eval "$(toolmesh completion bash)")
  zsh:   add this line to ~/.zshrc, after compinit:
          eval "$(toolmesh completion zsh)"
  fish:  toolmesh completion fish > ~/.config/fish/completions/toolmesh.fish

The script is generated from this toolmesh's commands: print it again after an upgrade."""


def add_parser(commands: Any, *, root: argparse.ArgumentParser) -> None:
    """``toolmesh completion``; ``root``: the whole command tree the script completes (the
    parser being built: complete by the time the command runs)."""
    p = commands.add_parser("completion", help="print a shell completion script (bash, zsh, fish)",
                            description=INSTALL,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(run=run, sync=True, completed_parser=root)


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(script(args.shell, args.completed_parser))
    return 0


# -- the parser tree, as the scripts need it ---------------------------------------------------

@dataclass(frozen=True)
class Option:
    """One option: its spellings, a short help, whether it takes a value, and its choices."""

    flags: tuple[str, ...]
    help: str
    takes_value: bool
    choices: tuple[str, ...]


@dataclass(frozen=True)
class Command:
    """One command (``toolmesh config put``) and what may follow it."""

    #: the words that name it, the program first, joined by spaces
    path: str
    #: its subcommands (aliases too) and their help; placeholders left out
    subcommands: tuple[tuple[str, str], ...]
    #: the choices of its positional arguments and their help
    choices: tuple[tuple[str, str], ...]
    options: tuple[Option, ...]
    #: (glob, subcommand): a word matching the glob selects that subcommand (MODULE:CLASS)
    catch_all: tuple[str, str] | None = None

    @property
    def words(self) -> tuple[tuple[str, str], ...]:
        """What completes a word that is not an option."""
        return self.subcommands + self.choices


def summary(help: str | None) -> str:
    """A help text cut to its gist, for a completion menu: the first clause before any
    parenthesis (defaults named there may come from the environment: never put them in a
    script)."""
    text = (help or "").split(" (", 1)[0]
    text = re.sub(r"%\([^)]*\)\w", "", text)
    text = " ".join(text.split())
    return text if len(text) <= 70 else text[:67].rstrip() + "..."


def tree(parser: argparse.ArgumentParser, path: str | None = None) -> list[Command]:
    """Every command of ``parser``'s tree, depth first, ``parser`` itself first."""
    path = path or parser.prog
    options: list[Option] = []
    choices: list[tuple[str, str]] = []
    groups: list[argparse._SubParsersAction] = []  # type: ignore[type-arg]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            groups.append(action)
        elif action.help == argparse.SUPPRESS:
            continue
        elif action.option_strings:
            options.append(Option(tuple(action.option_strings), summary(action.help),
                                  action.nargs != 0,
                                  tuple(str(c) for c in action.choices or ())))
        elif action.choices:
            choices += [(str(c), summary(action.help)) for c in action.choices]
    subcommands: list[tuple[str, str]] = []
    catch_all = None
    below: list[Command] = []
    for group in groups:
        helps = {a.dest: a.help for a in group._choices_actions}
        by_parser = {id(p): helps.get(name) for name, p in group.choices.items()
                     if name in helps}
        if isinstance(group, CommandsAction):
            catch_all = group.catch_all
        for name, sub in group.choices.items():
            if catch_all is None or name != catch_all[1]:
                subcommands.append((name, summary(helps.get(name) or by_parser.get(id(sub)))))
            below += tree(sub, f"{path} {name}")
    return [Command(path, tuple(subcommands), tuple(choices), tuple(options), catch_all),
            *below]


# -- the scripts ------------------------------------------------------------------------------

def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for ``shell`` of ``parser``'s commands."""
    commands = tree(parser)
    name = re.sub(r"\W", "_", parser.prog)
    return {"bash": bash, "zsh": zsh, "fish": fish}[shell](commands, parser.prog, name)


def _case(commands: list[Command], body: Callable[[Command], list[str]]) -> list[str]:
    """A POSIX ``case "$1"`` over the command paths (bash and zsh read it alike)."""
    lines = ['    case "$1" in']
    for command in commands:
        inner = body(command)
        if inner:
            lines += [f"        {shlex.quote(command.path)})",
                      *(f"            {line}" for line in inner), "            ;;"]
    return [*lines, "    esac"]


def _words(items: list[str]) -> str:
    return " ".join(shlex.quote(i) for i in items)


def _sub_case(command: Command) -> list[str]:
    """``case "$2"``: the subcommand a word selects, printed (nothing when it selects none)."""
    if not command.subcommands and not command.catch_all:
        return []
    lines = ['case "$2" in']
    if command.subcommands:
        names = "|".join(shlex.quote(n) for n, _ in command.subcommands)
        lines.append(f"""    {names}) printf '%s\\n' "$2" ;;""")
    if command.catch_all:
        glob, target = command.catch_all
        lines.append(f"    {glob}) printf '%s\\n' {shlex.quote(target)} ;;")
    return [*lines, "esac"]


def _shared_tables(commands: list[Command], name: str) -> list[str]:
    """The table functions bash and zsh share: ``_NAME_sub PATH WORD``, ``_NAME_words PATH``,
    ``_NAME_options PATH``, ``_NAME_value_options PATH``, ``_NAME_choices PATH OPTION``."""
    def printed(items: list[str]) -> list[str]:
        return [f"printf '%s\\n' {_words(items)}"] if items else []

    def option_choices(command: Command) -> list[str]:
        with_choices = [o for o in command.options if o.choices]
        if not with_choices:
            return []
        return ['case "$2" in',
                *(f"    {'|'.join(shlex.quote(f) for f in o.flags)}) printf '%s\\n' "
                  f"{_words(list(o.choices))} ;;" for o in with_choices),
                "esac"]

    return [
        f"_{name}_sub() {{", *_case(commands, _sub_case), "}", "",
        f"_{name}_words() {{", *_case(commands, lambda c: printed([w for w, _ in c.words])),
        "}", "",
        f"_{name}_options() {{",
        *_case(commands, lambda c: printed([f for o in c.options for f in o.flags])), "}", "",
        f"_{name}_value_options() {{",
        *_case(commands, lambda c: printed([f for o in c.options if o.takes_value
                                            for f in o.flags])), "}", "",
        f"_{name}_choices() {{", *_case(commands, option_choices), "}", "",
    ]


BASH_WALK = r"""
_NAME() {
    # the words typed so far: bash splits "a:b" and "--opt=value" at ':' and '=' (see
    # COMP_WORDBREAKS), glue them back
    local -a typed=()
    local i w glue=0
    for ((i = 1; i <= COMP_CWORD; i++)); do
        w="${COMP_WORDS[i]}"
        if ((${#typed[@]} > 0)) && [[ $w == [:=] || $glue == 1 ]]; then
            typed[${#typed[@]}-1]+="$w"
            [[ $w == [:=] ]] && glue=1 || glue=0
        else
            typed+=("$w")
            glue=0
        fi
    done
    local cur="${COMP_WORDS[COMP_CWORD]}" cmdpath="PROG" expect=0 sub n=$((${#typed[@]} - 1))
    for ((i = 0; i < n; i++)); do
        w="${typed[i]}"
        if ((expect)); then expect=0; continue; fi
        case "$w" in
            -*=*) ;;
            -*) [[ " $(_NAME_value_options "$cmdpath" | tr '\n' ' ') " == *" $w "* ]] && expect=1 ;;
            *) sub="$(_NAME_sub "$cmdpath" "$w")"; [[ -n $sub ]] && cmdpath="$cmdpath $sub" ;;
        esac
    done
    COMPREPLY=()
    if ((expect)); then
        # an option's value: its choices, else bash's default (files)
        COMPREPLY=($(compgen -W "$(_NAME_choices "$cmdpath" "${typed[n-1]}")" -- "$cur"))
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_NAME_options "$cmdpath")" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$(_NAME_words "$cmdpath")" -- "$cur"))
    fi
}
complete -o bashdefault -o default -F _NAME PROG
"""


def bash(commands: list[Command], prog: str, name: str) -> str:
    """The bash script (bash 4.3 or later)."""
    return "\n".join([
        f"# bash completion for {prog}: generated by `{prog} completion bash`",
        "", *_shared_tables(commands, name),
        BASH_WALK.replace("_NAME", f"_{name}").replace("PROG", prog).strip(), ""])


ZSH_WALK = r"""
_NAME() {
    local cmdpath="PROG" expect=0 w sub
    local cur="${words[CURRENT]}"
    for w in "${(@)words[2,CURRENT-1]}"; do
        if (( expect )); then expect=0; continue; fi
        case "$w" in
            -*=*) ;;
            -*) (( ${${(f)"$(_NAME_value_options "$cmdpath")"}[(Ie)$w]} )) && expect=1 ;;
            *) sub="$(_NAME_sub "$cmdpath" "$w")"; [[ -n $sub ]] && cmdpath="$cmdpath $sub" ;;
        esac
    done
    local -a items
    if (( expect )); then
        items=(${(f)"$(_NAME_choices "$cmdpath" "${words[CURRENT-1]}")"})
        if (( ${#items} )); then compadd -a items; else _files; fi
    elif [[ $cur == -* ]]; then
        items=(${(f)"$(_NAME_described_options "$cmdpath")"})
        _describe -t options option items
    else
        items=(${(f)"$(_NAME_described_words "$cmdpath")"})
        if (( ${#items} )); then _describe -t commands command items; else _files; fi
    fi
}

if [[ $funcstack[1] == _NAME ]]; then
    # autoloaded from a file named _NAME on $fpath: this call is the completion itself
    _NAME "$@"
else
    compdef _NAME PROG
fi
"""


def zsh(commands: list[Command], prog: str, name: str) -> str:
    """The zsh script: ``eval`` it after ``compinit``, or save it as ``_NAME`` on $fpath."""
    def described(pairs: list[tuple[str, str]]) -> list[str]:
        # _describe reads NAME:DESCRIPTION; a colon in a name is escaped
        items = [f"{n.replace(':', chr(92) + ':')}:{h}" for n, h in pairs]
        return [f"printf '%s\\n' {_words(items)}"] if items else []

    return "\n".join([
        f"#compdef {prog}",
        f"# zsh completion for {prog}: generated by `{prog} completion zsh`",
        "", *_shared_tables(commands, name),
        f"_{name}_described_words() {{",
        *_case(commands, lambda c: described(list(c.words))), "}", "",
        f"_{name}_described_options() {{",
        *_case(commands, lambda c: described([(f, o.help) for o in c.options
                                              for f in o.flags])), "}", "",
        ZSH_WALK.replace("_NAME", f"_{name}").replace("PROG", prog).strip(), ""])


def fish_quote(text: str) -> str:
    """``text`` as one fish word (single quotes; backslashes and quotes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


FISH_WALK = r"""
function __NAME_path --description 'the command the words typed so far name'
    set -l typed (commandline -opc)
    set -e typed[1]
    set -l cmdpath PROG
    set -l expect 0
    for w in $typed
        if test $expect = 1
            set expect 0
            continue
        end
        switch $w
            case '-*=*'
            case '-*'
                if contains -- $w (__NAME_value_options $cmdpath)
                    set expect 1
                end
            case '*'
                set -l sub (__NAME_sub $cmdpath $w)
                if test -n "$sub"
                    set cmdpath "$cmdpath $sub"
                end
        end
    end
    echo $cmdpath
end

function __NAME_at --description 'whether the words typed so far name this command'
    test (__NAME_path) = "$argv[1]"
end
"""


def fish(commands: list[Command], prog: str, name: str) -> str:
    """The fish script: save it as ~/.config/fish/completions/PROG.fish."""
    q = fish_quote

    def switch(body: Callable[[Command], list[str]]) -> list[str]:
        lines = ["    switch $argv[1]"]
        for command in commands:
            inner = body(command)
            if inner:
                lines += [f"        case {q(command.path)}", *(f"            {i}" for i in inner)]
        return [*lines, "    end"]

    def sub(command: Command) -> list[str]:
        if not command.subcommands and not command.catch_all:
            return []
        lines = ["switch $argv[2]"]
        if command.subcommands:
            lines += [f"    case {' '.join(q(n) for n, _ in command.subcommands)}",
                      "        echo $argv[2]"]
        if command.catch_all:
            lines += [f"    case {q(command.catch_all[0])}",
                      f"        echo {q(command.catch_all[1])}"]
        return [*lines, "end"]

    def value_options(command: Command) -> list[str]:
        flags = [f for o in command.options if o.takes_value for f in o.flags]
        return [f"printf '%s\\n' {' '.join(q(f) for f in flags)}"] if flags else []

    lines = [f"# fish completion for {prog}: generated by `{prog} completion fish`", "",
             f"function __{name}_sub", *switch(sub), "end", "",
             f"function __{name}_value_options", *switch(value_options), "end",
             FISH_WALK.replace("__NAME", f"__{name}").replace("PROG", q(prog)).rstrip(), ""]
    for command in commands:
        at = q(f"__{name}_at {q(command.path)}")
        for word, help in command.words:
            lines.append(f"complete -c {prog} -f -n {at} -a {q(word)} -d {q(help)}")
        for option in command.options:
            spellings = " ".join(f"-l {q(f[2:])}" if f.startswith("--") else f"-s {q(f[1:])}"
                                 for f in option.flags)
            value = (f" -x -a {q(' '.join(option.choices))}" if option.choices
                     else " -r" if option.takes_value else "")
            lines.append(f"complete -c {prog} -n {at} {spellings}{value} -d {q(option.help)}")
    return "\n".join(lines) + "\n"
