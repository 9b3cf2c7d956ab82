"""Test and cluster harness: the lock-patched moto S3 server and log-level invariant checks.

The multi-node Spark cluster (``python -m harness up|down|status``) is a later milestone.
"""
