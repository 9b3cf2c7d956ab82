"""Writing a version: what a commit is checked against before anything is written (``commit_checks``,
``split_schema``), the conflicts with the commits that won the race (``conflicts``), the commit point
written and recognised and the head a writer tracks (``commit_point``), the state a version leaves and
the state a writer builds it on (``state_commit``, ``state_lookup``), and which of a failed job's
uploads a committed version names (``uncommitted``).

``TransactionLog`` (``log.transaction_log``) runs the commit loop with these; nothing here imports it.
"""
