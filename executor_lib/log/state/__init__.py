"""A table's state as the log stores it, read and written: the listing of the log and its version
files (``version_files``, with the protocol checks made on each), replayed into a ``TableState``
(``state``); JSON checkpoints and the ``_last_checkpoint`` hint (``checkpoint``); and the Avro state
format of protocol v4: state manifests and shared manifests (``avro_state``, ``avro_records``), their
column sidecars, integrity checks and decoded-manifest caches, files another writer writes in place,
other implementations' states (``foreign_states``) and the streaming transactions a state records.

Writing an Avro state is ``state_writer`` (with ``compaction_policy`` and ``tombstone_counts``, which
only it uses): the reading modules here never import those three (``tests/test_imports.py``), so a
read of a table loads no state-writing code. The room builds on ``files`` and ``config`` only.
"""
