"""Public import path for transaction-log actions (``from executor_lib.actions import AddAction``)."""

from executor_lib.protocol.actions import (
    Action,
    AddAction,
    CommitInfoAction,
    MetadataAction,
    ProtocolAction,
    RemoveAction,
    SkipAction,
)

__all__ = [
    "Action",
    "AddAction",
    "CommitInfoAction",
    "MetadataAction",
    "ProtocolAction",
    "RemoveAction",
    "SkipAction",
]
