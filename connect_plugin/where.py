"""Row conditions as users give them: filter nodes, their JSON form, or SQL predicate text.

Every public function that takes a condition (``read(filter=)``, ``IndexTable.to_df``, ``group_by``,
``drop_partitions``, ``merge_splits``, ``prewarm``...) turns it into a checked contract filter tree
(``indextables_contract.filters``) here, so a malformed tree or predicate fails on the client,
before anything runs on the cluster.

    to_filter("level = 'ERROR' AND latency > 100")
    to_filter({"op": "query", "query": "timeout", "column": "msg"})
    to_filter(F.Term("level", "ERROR"))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_plugin.grammar import index_filter
from indextables_contract import filters as F

Where = F.Filter | Mapping[str, Any] | str
"""A row condition: filter tree nodes (``indextables_contract.filters``), their JSON form, or SQL predicate
text as in a WHERE clause (``"level = 'ERROR' AND latency > 100"``)."""


def to_filter(where: Where) -> F.Filter:
    """The filter tree a condition stands for.

    Raises:
        FilterError: a JSON tree that is malformed (the message names the part, ``filter.and[1]``).
        IndexTablesSQLError: predicate text that does not parse, or needs Spark (function calls).

    Example: ``to_filter("id >= 10") == F.Between("id", lower=10)``
    """
    if isinstance(where, str):
        return index_filter(where)
    return F.as_filter(where)
