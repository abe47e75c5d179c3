"""Following a reply as it streams, in time linear in its length.

:class:`StreamingParser` says, chunk by chunk, which new text is thought and which is answer,
as :func:`~toolmesh.agent.parser.parse_reply` would read the whole reply. Parsing the text so
far again on every chunk made a long answer quadratic (400k characters: a minute of CPU, with
every other dialog of the process waiting), so this is a state machine over lines that looks
at each character a bounded number of times: a line is classified once it is known to be a
label, the wrapping code fence, or plain text, and plain text is passed on as it arrives.
"""

from __future__ import annotations

import re
from typing import Literal

from toolmesh.agent.parser import _FENCE, _LABEL, Reply, parse_reply

_NAMES = ("Thought", "Action", "Args", "Final Answer", "Observation")
#: a partial line that may still become a label (``_LABEL``): the same flags, so the same
#: case folding
_LABEL_PREFIX = re.compile(
    r"[ \t*]*(?:(?:" + "|".join(_NAMES) + r")[ \t*]*|"
    + "|".join(re.escape(n[:k]) for n in _NAMES for k in range(len(n) - 1, 0, -1)) + ")?",
    re.I)
#: a partial first line that may still become the opening fence (``_FENCE``)
_OPENING_PREFIX = re.compile(r"\s*(?:`{1,2}|```[\w-]*\s*)")
#: a partial line that may still be a bare closing fence
_CLOSING_PREFIX = re.compile(r"\s*(?:`{1,2}|```\s*)")
#: an undecided line this long is looked at again only once it has doubled (or ends): only a
#: pathological line (thousands of spaces before a label) gets there, and it must not cost
#: quadratic time
_SHORT_LINE = 64

Section = Literal["thought", "answer", "other"]


class _StrippedView:
    """Deltas of ``"\\n".join(part.strip() for part in parts).strip()`` while the parts grow.

    Whitespace is held back until text follows it, since a strip may still drop it.
    """

    def __init__(self) -> None:
        self._held: list[str] = []
        self._in_part = False  # the current part has had non-whitespace text
        self._emitted = False

    def add(self, text: str) -> str:
        if not self._in_part:
            text = text.lstrip()
            if not text:
                return ""
            self._in_part = True
        core = text.rstrip()
        if not core:
            self._held.append(text)
            return ""
        delta = "".join(self._held) + core if self._emitted else core
        self._held = [text[len(core):]]
        self._emitted = True
        return delta

    def next_part(self) -> None:
        if self._in_part:
            self._held = []  # the finished part's trailing whitespace is stripped
        self._in_part = False
        self._held.append("\n")


class StreamingParser:
    """Follows a reply as it streams and says which new text is thought and which is answer.

    :meth:`feed` returns ``(thought_delta, answer_delta)`` for the text that is settled: a
    line that could still become a label (``"Final Ans"``), the opening fence or the closing
    fence, and whitespace a strip could still drop, are held back until later text decides
    them. The deltas join to exactly the thought and answer of :meth:`finish`'s complete
    parse, whatever the chunking.

    :attr:`scanned` counts the characters looked at; it stays within a small multiple of the
    text's length (the tests hold it to that).
    """

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self._line: list[str] = []  # the current line, while it is undecided
        self._line_len = 0
        self._checked = 0  # _line_len when the undecided line was last classified
        self._plain = False  # the current line is decided: plain text of its section
        self._started = False  # the first non-blank line (maybe an opening fence) is decided
        self._wrapped = False
        self._closing: list[str] = []  # a bare fence line (and blank lines after it) held back
        self._section: Section = "thought"  # the text before any label counts as thought
        self._thought = _StrippedView()
        self._answer = _StrippedView()
        self._deltas: tuple[list[str], list[str]] = ([], [])
        self.scanned = 0

    @property
    def text(self) -> str:
        return "".join(self._chunks)

    def feed(self, chunk: str) -> tuple[str, str]:
        self._chunks.append(chunk)
        self.scanned += len(chunk)
        start = 0
        while (end := chunk.find("\n", start)) >= 0:
            self._take(chunk[start:end], "\n")
            start = end + 1
        if start < len(chunk):
            self._take(chunk[start:], None)
        return self._flush()

    def finish(self) -> tuple[str, str, Reply]:
        """The last deltas and the complete parse."""
        self._take("", "")
        self._closing = []  # still held at the end: it was the closing fence
        thought, answer = self._flush()
        return thought, answer, parse_reply(self.text)

    def _flush(self) -> tuple[str, str]:
        thought, answer = ("".join(d) for d in self._deltas)
        self._deltas = ([], [])
        return thought, answer

    def _take(self, text: str, ending: str | None) -> None:
        """One piece of the current line; ``ending`` ends the line (``""`` at the end of the
        text), None: more of the line may follow."""
        if self._plain:
            self._route(text if ending is None else text + ending)
            self._plain = ending is None
            return
        self._line.append(text)
        self._line_len += len(text)
        if ending is None and _SHORT_LINE < self._line_len < 2 * self._checked:
            return
        line = "".join(self._line)
        self._line = [line]
        self._checked = len(line)
        self.scanned += len(line)
        if self._decide(line, ending):
            self._line, self._line_len, self._checked = [], 0, 0
            self._plain = ending is None

    def _decide(self, line: str, ending: str | None) -> bool:
        """Classify the current line (passing it on) if it can be; False: wait for more."""
        complete = ending is not None
        tail = ending or ""
        if not line.strip():
            if complete and self._closing:
                self._closing.append(line + tail)  # still the held fence's trailing blank lines
            elif complete and self._started:
                self._route(line + tail)
            return complete  # a blank line is nothing yet: it may still grow into anything
        if not self._started:
            if not complete and _OPENING_PREFIX.fullmatch(line):
                return False
            self._started = True
            if complete and _FENCE.match(line):
                self._wrapped = True
                return True
        if self._closing:  # text follows the held fence: it was not the last line
            self._route("".join(self._closing))
            self._closing = []
        if self._wrapped:
            if complete and line.strip() == "```":
                self._closing = [line + tail]
                return True
            if not complete and _CLOSING_PREFIX.fullmatch(line):
                return False
        if self._section != "answer":  # in the answer, labels are the answer's text
            label = _LABEL.match(line)
            if label is not None:
                self._start_section(label.group(1).lower())
                self._route(line[label.end():] + tail)
                return True
            if not complete and _LABEL_PREFIX.fullmatch(line):
                return False
        self._route(line + tail)
        return True

    def _start_section(self, label: str) -> None:
        if label == "thought":
            self._thought.next_part()
        self._section = ("answer" if label == "final answer"
                         else "thought" if label == "thought" else "other")

    def _route(self, text: str) -> None:
        self.scanned += len(text)
        if self._section == "thought":
            self._deltas[0].append(self._thought.add(text))
        elif self._section == "answer":
            self._deltas[1].append(self._answer.add(text))
