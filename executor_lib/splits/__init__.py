"""The split engine: the part of the executors that uses ``tantivy``.

- ``query/``: query text parsed, compiled to Tantivy queries, explained, and filters pushed down;
- ``rows/``: rows out of a split (the columnar copy, doc-store rows, the decoded-block cache, the
  reading half of companion splits);
- ``write/``: splits written, merged, planned for merging and published, companion splits built;
- ``search/``: the searcher over one split, searches over a table's splits, group aggregates;
- ``doc_mapping``, ``tokenizers``, ``panics`` at the root, used by all four.

The bytes of the files are ``executor_lib.format``. ``tantivy`` is imported by
``write.writer``, ``query.compile``, ``search.searcher`` and ``tokenizers``.
"""
