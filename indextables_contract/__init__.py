"""The contract between the IndexTables client (``connect_plugin``) and the cluster (``executor_lib``).

What one side builds and the other runs is defined here once, as frozen dataclasses with one
JSON codec each, in the standard library only: the thin client (no JVM, no tantivy) and the
executors both import it: the maintenance commands (``indextables_contract.commands``: names, typed
arguments, result schemas) and the aggregate plan (``indextables_contract.aggregate``):
what a pushed ``GROUP BY`` asks of each split and how per-split partial results merge.
"""
