"""Test and cluster harness: the lock-patched moto S3 server and log-level invariant checks.

The multi-node cluster (``python -m harness up|down|status``, ``harness.cluster``), fault
injection (``harness.faults``) and the stress workloads (``harness.stress``).
"""
