"""The ``toolmesh`` command's argument parser: argparse, plus what people expect of a CLI.

:class:`Parser` is the class of every parser in the ``toolmesh`` tree (``add_subparsers``
makes its subparsers of the class of the parser it is called on), so every command gets:

* a command group given alone (``toolmesh config``) prints its help and exits 0;
* an error in a subcommand is reported by that subcommand, with its usage and prog name,
  unknown options included (argparse leaves those to the top-level parser);
* "did you mean": for a mistyped command or choice, and for an unknown option (against the
  options of the command it was given to, else naming the sibling commands that have it);
* a group may route names matching a glob to one of its commands (``toolmesh run
  MODULE:CLASS``: subcommands are fixed names, a tool service's is not).

Call :meth:`Parser.parse_command` instead of ``parse_args``.
"""

from __future__ import annotations

import argparse
import fnmatch
from collections.abc import Sequence
from difflib import get_close_matches
from typing import Any

#: the namespace attribute each parser sets by default: the deepest one to parse is the
#: subcommand the user ran
LEAF = "_toolmesh_leaf"

#: how alike a typo and a name must be (difflib's ratio) to suggest the name
CLOSE = 0.75


class CommandsAction(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The subcommands of a :class:`Parser`, each parser told which group it belongs to."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: (glob, command): names matching the glob that are no command's go to this command
        self.catch_all: tuple[str, str] | None = None

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        parser = super().add_parser(name, **kwargs)
        if isinstance(parser, Parser):
            parser.group = self
        return parser

    def route(self, pattern: str, *, to: str) -> None:
        """Hand any name matching the glob ``pattern`` (that is not a command's own) to
        command ``to``; the group's ``dest`` then holds the name as given."""
        if to not in self._name_parser_map:
            raise ValueError(f"no command {to!r} to route {pattern!r} to")
        self.catch_all = (pattern, to)

    def target(self, name: str) -> str | None:
        """The command that handles ``name``, or ``None``."""
        if name in self._name_parser_map:
            return name
        if self.catch_all and fnmatch.fnmatchcase(name, self.catch_all[0]):
            return self.catch_all[1]
        return None

    def commands(self) -> dict[str, argparse.ArgumentParser]:
        """Each command's parser by name, aliases included, in the order they were added."""
        return dict(self._name_parser_map)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        name = values[0]
        target = self.target(name) or name
        super().__call__(parser, namespace, [target, *values[1:]], option_string)
        # the name as given, where argparse put the command's; unless the command's own
        # options took over that attribute (argparse lets them)
        if (target != name and self.dest is not argparse.SUPPRESS
                and getattr(namespace, self.dest, None) == target):
            setattr(namespace, self.dest, name)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` with help for a group given alone, errors reported by the
    subcommand they concern, and "did you mean" suggestions (see the module's doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", CommandsAction)
        #: the group this parser is a command of (none for the top-level parser)
        self.group: CommandsAction | None = None
        #: this parser's own subcommands, if it is a group
        self.subcommands: CommandsAction | None = None
        self.set_defaults(**{LEAF: self})

    def add_subparsers(self, **kwargs: Any) -> Any:
        # never required: a group given alone prints its help (parse_command) instead of
        # argparse's "the following arguments are required"
        kwargs["required"] = False
        self.subcommands = super().add_subparsers(**kwargs)
        return self.subcommands

    def parse_command(self, argv: Sequence[str] | None = None) -> argparse.Namespace:
        """The parsed command line. Exits 2 on an error, reported by the subcommand it
        concerns; prints a group's help and exits 0 when no subcommand of it was given."""
        args, extras = self.parse_known_args(argv)
        leaf = vars(args).pop(LEAF, self)
        if extras:
            leaf.error(leaf.unrecognized(extras))
        if leaf.subcommands is not None:
            leaf.print_help()
            leaf.exit(0)
        return args

    def unrecognized(self, extras: Sequence[str]) -> str:
        """The error message for arguments this parser does not take, with suggestions."""
        options = [e.split("=", 1)[0] for e in extras if e.startswith("-") and e != "-"]
        hints: list[str] = []
        for option in options:
            match = get_close_matches(option, list(self._option_string_actions), n=1,
                                      cutoff=CLOSE)
            owners = self.siblings_with(option)
            if match:
                hints.append(f"did you mean {match[0]}?" if len(options) == 1
                             else f"{option}: did you mean {match[0]}?")
            elif owners:
                hints.append(f"{option} is an option of {', '.join(owners)}")
        message = f"unrecognized arguments: {' '.join(extras)}"
        return f"{message} ({'; '.join(hints)})" if hints else message

    def siblings_with(self, option: str) -> list[str]:
        """The other commands of this parser's group that take ``option``."""
        if self.group is None:
            return []
        seen: set[int] = {id(self)}
        owners = []
        for name, parser in self.group.commands().items():
            if id(parser) not in seen and option in parser._option_string_actions:
                owners.append(name)
            seen.add(id(parser))
        return owners

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if isinstance(action, CommandsAction) and action.target(value) is not None:
            return
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError:
            choices = [str(c) for c in action.choices or ()]
            if isinstance(action, CommandsAction) and action.catch_all:
                choices.remove(action.catch_all[1])  # a placeholder, not a name to type
            match = get_close_matches(str(value), choices, n=1, cutoff=0.6)
            if not match:
                raise
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r} (did you mean {match[0]!r}?)") from None
