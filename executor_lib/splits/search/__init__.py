"""Searching: one split (``searcher``), a table's splits (``table_search``), group aggregates
(``group_aggregate``)."""
