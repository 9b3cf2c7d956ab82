"""The project's version, written once: ``[project].version`` of the root ``pyproject.toml``.

Code reads it here (``VERSION``): from that file when the packages run from a source checkout (an
editable install or ``PYTHONPATH``: the file is the truth even before a reinstall), else from the
installed distribution's metadata (``importlib.metadata``: ``indextables``, or the thin client's
``indextables-connect``, whose ``clients/connect/pyproject.toml`` carries the same number, as
``tests/contract/test_version.py`` checks). Standard library only.

    from indextables_contract.version import VERSION   # e.g. "1.2.0"
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

DISTRIBUTIONS = ("indextables", "indextables-connect")
_PROJECT = re.compile(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", re.MULTILINE | re.DOTALL)
_FIELD = r'^{}\s*=\s*"([^"]+)"\s*$'


def source_version(root: Path) -> str | None:
    """``[project].version`` of ``root/pyproject.toml`` if it is this project's (``name = "indextables"``),
    else None. A small reader, not a TOML parser: Python 3.10 has no ``tomllib``."""
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    project = _PROJECT.search(text)
    if project is None:
        return None
    name = re.search(_FIELD.format("name"), project.group(1), re.MULTILINE)
    version = re.search(_FIELD.format("version"), project.group(1), re.MULTILINE)
    if name is None or name.group(1) != "indextables" or version is None:
        return None
    return version.group(1)


def installed_version() -> str | None:
    """The version of the first of ``DISTRIBUTIONS`` that is installed, or None."""
    for name in DISTRIBUTIONS:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


VERSION: str = source_version(Path(__file__).resolve().parent.parent) or installed_version() or "0+unknown"
