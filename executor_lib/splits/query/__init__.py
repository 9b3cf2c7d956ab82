"""Queries: the query language parsed (``syntax``), compiled to Tantivy queries (``compile``),
explained (``explain``), and Spark filters planned for the index (``pushdown``)."""
