"""The CLI reference (docs/reference/cli.md) as Markdown, read from the real argparse parser.

Every command and subcommand of ``toolmesh`` (``toolmesh.cli.main.build_parser``: the tree
shell completion is generated from too) gets a heading, its description, its usage and a table
of its arguments and options, in the order the parser lists them. Nothing here knows a command
by name: a command added to the parser appears on the page at the next build.
"""

from __future__ import annotations

import argparse
import html
import re
from collections.abc import Iterator
from dataclasses import dataclass

#: the width usage lines are wrapped at: fixed, so the page does not depend on the terminal
#: the site was built in (argparse reads $COLUMNS)
WIDTH = 88

#: argparse's (private) class of a parser's group of subcommands
SubParsers = argparse._SubParsersAction  # type: ignore[type-arg]

#: characters Markdown would read as markup in prose taken from help texts
_MARKUP = re.compile(r"([\\`*_\[\]|])")


@dataclass(frozen=True, slots=True)
class Command:
    """One parser of the tree: ``path`` is its command line (``("toolmesh", "config", "put")``)."""

    path: tuple[str, ...]
    parser: argparse.ArgumentParser
    #: the help its parent's list of commands gives it (the one-line summary)
    summary: str | None
    aliases: tuple[str, ...]

    @property
    def name(self) -> str:
        return " ".join(self.path)

    @property
    def anchor(self) -> str:
        return "-".join(self.path).replace(":", "").lower()


def commands(parser: argparse.ArgumentParser) -> Iterator[Command]:
    """Every parser of the tree under ``parser``, depth first, the root first."""
    yield from _walk(parser, ("toolmesh",), None, ())


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...], summary: str | None,
          aliases: tuple[str, ...]) -> Iterator[Command]:
    yield Command(path, parser, summary, aliases)
    group = _subcommands(parser)
    if group is None:
        return
    helps = {a.dest: a.help for a in group._choices_actions}
    names: dict[int, list[str]] = {}
    parsers: dict[int, argparse.ArgumentParser] = {}
    for name, child in group._name_parser_map.items():  # aliases map to the same parser
        names.setdefault(id(child), []).append(name)
        parsers[id(child)] = child
    for key, (name, *others) in names.items():
        yield from _walk(parsers[key], (*path, name), helps.get(name), tuple(others))


def _subcommands(parser: argparse.ArgumentParser) -> SubParsers | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def markdown(parser: argparse.ArgumentParser) -> str:
    """The whole reference: a section for each command, headings nested as the commands
    are (``##`` for ``toolmesh`` and ``toolmesh serve``, ``###`` for ``toolmesh config put``)."""
    return "\n".join(_section(command) for command in commands(parser))


def _section(command: Command) -> str:
    parser = command.parser
    # the page's title is its only h1: the root and its commands are h2, theirs h3, then h4
    level = "#" * max(2, min(len(command.path), 4))
    out = [f"{level} `{command.name}` {{#{command.anchor}}}", ""]
    if command.aliases:
        out += ["Also spelt " + ", ".join(f"`{a}`" for a in command.aliases) + ".", ""]
    described = parser.description or command.summary
    if described:
        out += [_block(parser, described), ""]
    out += ["```text", _usage(parser), "```", ""]
    group = _subcommands(parser)
    if group is not None:
        out += _command_table(command, group)
    for title, actions in _argument_groups(parser):
        first = "Argument" if "positional" in title else "Option"
        out += [f"**{_prose(title.capitalize())}**", "", f"| {first} | Description |",
                "|---|---|"]
        out += [f"| {_invocation(a)} | {_cell(_help(parser, a))} |" for a in actions]
        out.append("")
    if parser.epilog:
        out += [_block(parser, parser.epilog), ""]
    return "\n".join(out)


def _command_table(command: Command, group: SubParsers) -> list[str]:
    out = ["**Commands**", "", "| Command | Description |", "|---|---|"]
    for action in group._choices_actions:
        anchor = "-".join((*command.path, action.dest)).replace(":", "").lower()
        out.append(f"| [`{action.dest}`](#{anchor}) | {_prose(action.help or '')} |")
    return [*out, ""]


def _argument_groups(
        parser: argparse.ArgumentParser) -> Iterator[tuple[str, list[argparse.Action]]]:
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if a.help is not argparse.SUPPRESS
                   and not isinstance(a, (argparse._SubParsersAction, argparse._HelpAction))]
        if actions:
            yield group.title or "options", actions


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = parser.formatter_class(prog=parser.prog, width=WIDTH)  # type: ignore[call-arg]
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups,
                        prefix="")
    return formatter.format_help().strip()


def _invocation(action: argparse.Action) -> str:
    """``-u``, ``--url`` ``URL``; or a positional's name."""
    formatter = argparse.HelpFormatter(prog="toolmesh")
    shown = formatter._format_action_invocation(action)
    return "`" + shown.replace("`", "'") + "`"


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The action's help with ``%(default)s`` and the like filled in, and what argparse's
    help leaves to the reader: required, the choices, the default."""
    formatter = parser.formatter_class(prog=parser.prog)
    text = formatter._expand_help(action) if action.help else ""
    notes = []
    if action.required and action.option_strings:
        notes.append("required")
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        notes.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    default = action.default
    if (default not in (None, False, argparse.SUPPRESS, [], "")
            and action.nargs != 0 and "default" not in text):
        notes.append(f"default `{default}`")
    extra = "; ".join(notes)
    return f"{_prose(text)} ({extra})" if text and extra else (_prose(text) or extra)


def _block(parser: argparse.ArgumentParser, text: str) -> str:
    """A description or epilog: as written when the parser keeps its line breaks (a raw
    formatter), else as prose."""
    if issubclass(parser.formatter_class, argparse.RawDescriptionHelpFormatter):
        return "```text\n" + text.strip("\n") + "\n```"
    return _prose(text)


def _prose(text: str) -> str:
    """Help text as Markdown that shows it as written: HTML and Markdown markup escaped,
    argparse's ``%%`` undone."""
    text = " ".join(text.replace("%%", "%").split())
    return _MARKUP.sub(r"\\\1", html.escape(text, quote=False))


def _cell(text: str) -> str:
    """Text inside a table cell (escaped by :func:`_prose` or written here: no line break)."""
    return " ".join(text.split())
