"""The one vocabulary for option values: booleans, sizes and durations, as every option family reads them
(read and write options, log settings, storage options, SQL commands). Standard library only.

Each caller raises its own error naming its option; what a value may look like is decided here once:

* a boolean is ``true``/``false``, ``1``/``0`` or ``yes``/``no``, in any case;
* a size is a positive number of bytes, or a number with a binary unit ``K``, ``M``, ``G`` or ``T``
  (a fraction allowed, e.g. ``1.5G``), optionally followed by ``B`` or ``iB``: ``104857600``,
  ``512K``, ``100M``, ``1.5G``, ``4GiB``;
* a duration is a finite number >= 0 in the unit the option's name says (``...Hours``,
  ``...Seconds``): ``24``, ``0.5``, ``1e3``; not negative, not NaN or infinity.
"""

from __future__ import annotations

import math
import re
from typing import Any

TRUE_WORDS = frozenset({"true", "1", "yes"})
FALSE_WORDS = frozenset({"false", "0", "no"})
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def as_bool(value: Any) -> bool | None:
    """``value`` as a boolean, or None if it is not one of the words above.

    Example:
        >>> as_bool("TRUE"), as_bool("no"), as_bool("maybe")
        (True, False, None)
    """
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    return None


def as_size(value: Any) -> int | None:
    """``value`` as a positive number of bytes, or None if it is not a size as described above.

    Example:
        >>> as_size("512K"), as_size("1.5G"), as_size(4096), as_size("1.5"), as_size("0")
        (524288, 1610612736, 4096, None, None)
    """
    match = _SIZE.match(str(value))
    if not match:
        return None
    number, unit = match.group(1), match.group(2).lower()
    if "." in number and not unit:
        return None  # a fraction of a byte
    scale = 1024 ** " kmgt".index(unit or " ")
    size = int(float(number) * scale) if "." in number else int(number) * scale
    return size if size > 0 else None


def as_duration(value: Any) -> float | None:
    """``value`` as a duration (a finite number >= 0, in the option's own unit), or None if it is not one.

    Example:
        >>> as_duration("24"), as_duration(" 0.5 "), as_duration("-1"), as_duration("nan"), as_duration("1h")
        (24.0, 0.5, None, None, None)
    """
    if isinstance(value, bool):
        return None
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None
