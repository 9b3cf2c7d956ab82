"""Split files: the Quickwit bundle layout, doc mappings, the split writer and searcher.

Only ``writer`` and ``searcher`` import tantivy.
"""
