"""How many examples a property with a count of its own runs under the loaded profile.

A count written in a test (``@settings(max_examples=scaled(300))``) is relative to
Hypothesis's own default of 100: the property runs ``300 * profile / 100`` examples, so the
README's ``pytest`` (profile "default", 20) runs a fifth of it and ``.ci/run``'s deep pass
(profile "deep", 200) twice it. A count written as a plain number would run the same under
every profile, out of the reach of both.
"""

from __future__ import annotations

from hypothesis import settings

#: Hypothesis's default ``max_examples``, the unit the counts in tests are written in
UNIT = 100


def scaled(examples: int) -> int:
    """``examples`` (written against a profile of 100) under the loaded profile."""
    return max(1, examples * settings().max_examples // UNIT)
