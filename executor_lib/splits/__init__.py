"""Split files: doc mappings, the split writer, merger and searcher, search over a table's splits.

The bundle layout a split file is stored in is ``executor_lib.protocol.bundle``. Only ``writer``
and ``searcher`` import tantivy.
"""
