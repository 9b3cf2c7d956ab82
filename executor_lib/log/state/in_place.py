"""Files another writer writes in place. IndexTables4Spark on a Hadoop filesystem creates a file and
then writes its bytes, and its ``.crc`` sidecar beside it (``HadoopCloudStorageProvider
.writeFileIfNotExists``), so a concurrent reader on the local filesystem can find a version file or a
state manifest empty, half written, or with its sidecar not yet written. Such a read is repeated after a
pause, a few times (``IN_PROGRESS_RETRIES``, about 2.5 s), before the file counts as corrupt: a version
file whenever it does not decode, a state manifest only when it looks unfinished (``written_so_far``),
so that a damaged one is reported at once. This project's own writes are never seen partial (a complete
temporary file linked into place, or one conditional put)."""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable
from typing import TypeVar

from executor_lib.log.state.manifest_integrity import crc_sidecar_key
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import CorruptLogError, ObjectNotFoundError, UnknownActionError

log = logging.getLogger(__name__)

# Re-reads of a file that is empty or does not decode, and the pause before each (seconds).
IN_PROGRESS_RETRIES = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0)

T = TypeVar("T")


def read_settled(
    read: Callable[[], bytes],
    decode: Callable[[bytes], T],
    source: str,
    unfinished: Callable[[bytes], bool] = lambda data: True,
) -> T:
    """``decode(read())``, read again after a pause while decoding raises CorruptLogError and
    ``unfinished(data)`` says the file may still be being written in place; the last error is raised.
    An unknown action type is raised at once: a complete file written by a newer writer.

    >>> read_settled(lambda: b"42", int, "s3://b/t/_transaction_log/00000000000000000007.json")
    42
    """
    for pause in (*IN_PROGRESS_RETRIES, None):
        data = read()
        try:
            return decode(data)
        except UnknownActionError:
            raise
        except CorruptLogError:
            if pause is None or not unfinished(data):
                raise
            log.debug("%s: not readable yet (being written?), read again in %.2f s", source, pause)
            time.sleep(pause)
    raise AssertionError("unreachable")


def written_so_far(store: ObjectStore, key: str, data: bytes) -> bool:
    """Whether ``data``, read from ``key`` and found not whole, may be a file another writer is still
    writing in place: it is empty, or its Hadoop ``.crc`` sidecar (closed last) does not cover it yet.
    A file without a sidecar was written whole (this project's writes, an object store's put): its
    damage is reported at once.

    >>> # written_so_far(store, "_transaction_log/state-v00000000000000000007/_manifest.avro", b"")  -> True
    """
    if not data:
        return True
    try:
        sidecar = store.read(crc_sidecar_key(key))
    except ObjectNotFoundError:
        return False
    if len(sidecar) < 8 or (len(sidecar) - 8) % 4:
        return True
    (chunk,) = struct.unpack(">i", sidecar[4:8])
    return chunk <= 0 or (len(sidecar) - 8) // 4 != -(-len(data) // chunk)
