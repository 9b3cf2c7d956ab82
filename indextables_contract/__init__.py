"""The contract between the IndexTables client (``connect_plugin``) and the cluster (``executor_lib``).

What one side builds and the other runs is defined here once, as frozen dataclasses with one
JSON codec each, in the standard library only: the thin client (no JVM, no tantivy) and the
executors both import it (PROTOCOL.md §17):

- ``commands``: the maintenance commands: names, typed arguments, result schemas;
- ``filters``: the filter tree of reads, commands and aggregates;
- ``read``: what a client pushes into one indexed read (columns, filter, limit, match columns);
- ``aggregate``: what a pushed ``GROUP BY`` asks of each split and how partial results merge;
- ``errors``: the one exception hierarchy both sides raise, each class with a stable code;
- ``settings``: every ``spark.indextables.*`` key, supported or accepted with no effect (docs/settings.md);
- ``write_settings``: the after-write settings (merge-, purge- and optimize-on-write) both sides check.
"""

FORMAT = "indextables"  # the data source's name: format("indextables"), the provider of tables written here
