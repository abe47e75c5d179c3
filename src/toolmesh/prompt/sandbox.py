"""The Jinja2 sandbox templates render in, and the limits on what one render may cost.

Prompt templates are written by whoever holds ``config:write`` in a workspace, so a template is
untrusted code: Jinja's :class:`~jinja2.sandbox.SandboxedEnvironment` keeps it away from
Python's internals, but not from the CPU or memory (``{% for a in range(99999) %}{% for b in
range(99999) %}`` or ``{{ 'x' * 10**10 }}``). :class:`BoundedEnvironment` refuses, early and
with a clear message, what is cheap to see coming — a ``range()`` longer than
:attr:`RenderLimits.max_range`, a string, list or number built by ``*``, ``**``, ``+`` or ``%``
beyond :attr:`RenderLimits.max_size` — and :func:`render_bounded` stops output beyond that size
as it is produced. What cannot be seen coming (a loop that is merely long, a macro that doubles
a string) is bounded by the process renders run in (:mod:`toolmesh.prompt.renderer`): its time
limit and its memory limit.

This module imports nothing of toolmesh but :mod:`toolmesh.errors`, so that the render worker
process (:mod:`toolmesh.prompt.worker`) starts fast.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

MiB = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class RenderLimits:
    """What one template render may cost, and how many may run at once.

    The defaults are far above what a prompt needs (the shipped agent prompt with fifty tools
    renders in about a millisecond to some tens of kilobytes) and far below what would make a
    server notice.
    """

    #: seconds a render may take (compiling it included); then its worker process is killed
    timeout: float = 2.0
    #: characters a render may produce, and the most a string, list or number (digits) built
    #: by an operator in the template may hold
    max_size: int = 2_000_000
    #: items a ``range()`` in a template may have
    max_range: int = 10_000
    #: MiB of memory a render worker may take beyond what it holds at start (0: no limit)
    max_memory: int = 512
    #: worker processes rendering at once; one workspace may use all but one of them, and the
    #: workspaces whose renders run long all but one together (toolmesh.prompt.fair_share)
    workers: int = 2

    def __post_init__(self) -> None:
        for name in ("timeout", "max_size", "max_range", "workers"):
            if not getattr(self, name) > 0:
                raise ValueError(f"render limit {name!r} must be positive, "
                                 f"not {getattr(self, name)!r}")
        if self.max_memory < 0:
            raise ValueError(f"render limit 'max_memory' must be 0 or more, "
                             f"not {self.max_memory!r}")


class LimitExceeded(Exception):
    """A template built or produced more than its :class:`RenderLimits` allow; the message says
    what and which limit (``--prompt-max-size``...), for the template's author to act on."""


def _size(value: Any) -> int:
    """The size an operand counts as: its length, or for an integer its decimal digits
    (estimated from its bits: exact digits of a huge number are what must not be computed)."""
    if isinstance(value, bool):
        return 1
    if isinstance(value, int):
        return value.bit_length() * 30103 // 100000 + 1
    if isinstance(value, (str, list, tuple)):
        return len(value)
    return 1


class BoundedEnvironment(SandboxedEnvironment):
    """Jinja's sandbox with ``range()`` capped at ``max_range`` items and the operators that can
    build something big (``*``, ``**``, ``+``, ``%``) checked against ``max_size`` *before*
    they run. Output is not HTML-escaped (a prompt is not a web page), a trailing newline is
    kept, and a missing variable is an error that names it."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, *, limits: RenderLimits) -> None:
        super().__init__(undefined=jinja2.StrictUndefined, autoescape=False,
                         keep_trailing_newline=True)
        self.limits = limits
        self.globals["range"] = self._range

    def _range(self, *args: int) -> range:
        r = range(*args)
        if len(r) > self.limits.max_range:
            raise LimitExceeded(f"range() of {len(r):,} items; templates may loop over "
                                f"{self.limits.max_range:,} at most (--prompt-max-range)")
        return r

    def call_binop(self, context: jinja2.runtime.Context, operator_: str, left: Any,
                   right: Any) -> Any:
        limit = self.limits.max_size
        if operator_ == "*":
            if isinstance(left, int) and not isinstance(right, int):
                left, right = right, left
            if isinstance(right, int) and isinstance(left, (str, list, tuple)):
                if len(left) * max(right, 0) > limit:
                    raise self._too_big(f"{type(left).__name__} * {right:,}",
                                        len(left) * right)
            elif isinstance(left, int) and isinstance(right, int):
                self._check(_size(left) + _size(right), "a product")
        elif operator_ == "**":
            if isinstance(left, int) and isinstance(right, int) and right > 0:
                digits = max(abs(left).bit_length() - 1, 0) * right * 30103 // 100000
                self._check(digits, "a power")
        elif operator_ == "+":
            if isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
                self._check(len(left) + len(right), "a sum")
        elif operator_ == "%" and isinstance(left, str):
            # printf-style widths ('%999999999s') build strings from nothing
            result = self.binop_table["%"](left, right)
            self._check(len(result), "a %-formatted string")
            return result
        return self.binop_table[operator_](left, right)

    def call(__self, __context: jinja2.runtime.Context, __obj: Any,  # noqa: N805
             *args: Any, **kwargs: Any) -> Any:
        """Call as the sandbox does, then refuse a result over the size limit (``'x'.ljust(n)``,
        ``'{:>n}'.format(x)``): built already, but stopped before it grows further."""
        result = super().call(__context, __obj, *args, **kwargs)
        if isinstance(result, (str, list, tuple)) and len(result) > __self.limits.max_size:
            raise __self._too_big(f"a call of {getattr(__obj, '__name__', 'a function')}()",
                                  len(result))
        return result

    def _check(self, size: int, what: str) -> None:
        if size > self.limits.max_size:
            raise self._too_big(what, size)

    def _too_big(self, what: str, size: int) -> LimitExceeded:
        return LimitExceeded(f"{what} would hold about {size:,} items or characters; templates "
                             f"may build {self.limits.max_size:,} at most (--prompt-max-size)")


def render_bounded(template: jinja2.Template, variables: dict[str, Any], *,
                   limits: RenderLimits) -> str:
    """``template`` rendered, stopped with :class:`LimitExceeded` as soon as its output passes
    ``limits.max_size`` characters (a loop printing a little many times is stopped by size
    long before its time limit)."""
    pieces: list[str] = []
    size = 0
    chunks: Iterable[str] = template.generate(variables)
    for chunk in chunks:
        size += len(chunk)
        if size > limits.max_size:
            raise LimitExceeded(f"its output passed {limits.max_size:,} characters "
                                "(--prompt-max-size)")
        pieces.append(chunk)
    return "".join(pieces)
