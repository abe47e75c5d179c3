"""Whether the gateway's own token (``--token``) is too weak to stand in front of a network.

The throttle (:mod:`.throttle`) slows a guesser to a few tokens a second per address; that is
worth nothing against a one-character token, or ``passwordpassword``. A token is weak when it is
shorter than :data:`MIN_LENGTH` characters or holds less than :data:`MIN_BITS` bits by the
Shannon entropy of its own characters (length × bits per character as they are spread in it): a
random 16-character token of letters and digits has about 60, ``secrets.token_urlsafe(32)``
about 190, ``passwordpassword`` 44 and ``aaaaaaaaaaaaaaaaaaaa`` none.
"""

from __future__ import annotations

import math
from collections import Counter

__all__ = ["MIN_BITS", "MIN_LENGTH", "SUGGESTION", "weakness"]

MIN_LENGTH = 16
MIN_BITS = 48.0
#: how to make a strong one
SUGGESTION = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def entropy_bits(token: str) -> float:
    """The token's length times the Shannon entropy of its characters' spread, in bits."""
    n = len(token)
    if n == 0:
        return 0.0
    return max(0.0, -sum(c * math.log2(c / n) for c in Counter(token).values()))


def weakness(token: str) -> str | None:
    """Why ``token`` is weak (a phrase for an error message), or ``None``."""
    if len(token) < MIN_LENGTH:
        return f"it is {len(token)} character{'s' if len(token) != 1 else ''} long (at least " \
               f"{MIN_LENGTH} are needed)"
    bits = entropy_bits(token)
    if bits < MIN_BITS:
        return f"its characters repeat too much (about {bits:.0f} bits of entropy; at least " \
               f"{MIN_BITS:g} are needed)"
    return None
