"""Spark's pushed filters (``pyspark.sql.datasource.Filter``) as contract filter trees
(``indextables_contract.filters``): what the index may answer; None for what it cannot."""

from __future__ import annotations

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from indextables_contract import filters as F


def spark_filter_to_filter(f: Filter) -> F.Filter | None:
    """Spark's pushed filter in the shared vocabulary; None if it has no equivalent."""
    if isinstance(f, Not):
        if isinstance(f.child, EqualNullSafe):
            return None  # NOT(a <=> v) keeps NULL rows; the index's NOT(a = v) would not
        child = spark_filter_to_filter(f.child)
        return None if child is None else F.Not(child)
    attribute: tuple[str, ...] = tuple(getattr(f, "attribute", ()))
    if len(attribute) != 1:
        return None  # nested struct fields are not index fields
    column = attribute[0]
    if isinstance(f, (EqualTo, EqualNullSafe)):
        if f.value is None:  # a = NULL is never true; a <=> NULL is IS NULL
            return F.Not(F.Exists(column)) if isinstance(f, EqualNullSafe) else None
        return F.Term(column, f.value)
    if isinstance(f, In):
        values = tuple(v for v in f.value if v is not None)
        return F.TermIn(column, values) if values else None
    if isinstance(f, GreaterThan):
        return F.Between(column, lower=f.value, lower_inclusive=False)
    if isinstance(f, GreaterThanOrEqual):
        return F.Between(column, lower=f.value)
    if isinstance(f, LessThan):
        return F.Between(column, upper=f.value, upper_inclusive=False)
    if isinstance(f, LessThanOrEqual):
        return F.Between(column, upper=f.value)
    if isinstance(f, IsNull):
        return F.Not(F.Exists(column))
    if isinstance(f, IsNotNull):
        return F.Exists(column)
    if isinstance(f, StringStartsWith):
        return F.Prefix(column, f.value)
    if isinstance(f, StringEndsWith):
        return F.Regex(column, F.suffix_pattern(f.value))
    if isinstance(f, StringContains):
        return F.Contains(column, f.value)
    return None


def spark_filter_columns(f: Filter) -> set[str]:
    """The top-level columns a Spark filter names."""
    columns = {str(a[0]) for a in [getattr(f, "attribute", ())] if a}
    for child in (getattr(f, "child", None), getattr(f, "left", None), getattr(f, "right", None)):
        if isinstance(child, Filter):
            columns |= spark_filter_columns(child)
    return columns
