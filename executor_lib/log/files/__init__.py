"""The live files of a snapshot as Arrow columns, and data skipping over them.

A decoded manifest is a ``file_table.FileChunk`` (its columns in the compact forms of
``chunk_encoding``, its partitions indexed by ``partition_index``); a state's chunks plus the version
files replayed on them are ``live_files.LiveFiles``; ``pruning`` judges which files (or manifests) a
predicate may match; the arrays are built without pandas (``executor_lib.arrow_arrays``). Nothing
here reads the store or imports the rest of the log: the rooms above (``state``, the snapshot,
``maintenance``, ``commit``) build on it.
"""
