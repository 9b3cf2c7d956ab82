"""Looking after a table's log beside its commits: checkpoints (``checkpointing``: consolidating a
version's state, the ``_last_checkpoint`` hint of an Avro state), retention and garbage collection
(``cleanup``), PURGE of split files no retained version needs (``purge``), and what ``describe`` and
``history`` show.

The functions work through ``interfaces.MaintainedLog``, the few members of a log they use, and never
import ``log.transaction_log``, which calls them: imports run one way.
"""
