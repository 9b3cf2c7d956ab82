"""The bytes of a split as Tantivy, Quickwit and tantivy4java write them, apart from the engine
that uses them (as tantivy keeps ``src/directory/``, ``src/termdict/`` and ``src/store/``).

- ``directory``: Tantivy's composite files and file footers (the footer magic, the VInt codec);
- ``termdict``: term dictionaries (FST and SSTable) and the conversion between them;
- ``store``: the doc store's blocks and skip index, and its documents decoded column-wise;
- ``quickwit``: the split bundle and its hotcache;
- ``tantivy4java``: the Parquet companion manifest tantivy4java writes.

Nothing here imports ``tantivy``, ``executor_lib.splits``, ``cache``, ``log`` or ``spark``
(``tests/test_imports.py`` checks it): a file format can be read and written without the engine.
"""
