"""Finite state transducers (maps from sorted byte keys to u64) in the format of ``tantivy-fst``,
the fork of BurntSushi's ``fst`` 0.3 that Tantivy uses: a reader and a builder, byte for byte as
the Rust builder writes them. No tantivy here.

Tantivy keeps two kinds of FST map: the FST term dictionary the ``tantivy`` Python package writes
(key -> term ordinal; ``fst_termdict.py``), and the block index of a multi-block SSTable term
dictionary (last key of each block -> block number; ``sstable_termdict.py``).

Format (``fst`` 0.3.5, ``src/raw/{build,node,registry,pack}.rs``; version 2, no checksum)::

    [u64 LE version = 2][u64 LE type = 0][nodes...][u64 LE number of keys][u64 LE root address]

A node is addressed by its *last* byte and read backwards from it. Its state byte's top bits say
its kind: ``11`` one transition to the node written just before it (no output), ``10`` one
transition with a delta address and an output, else any number of transitions (``01`` = final).
Common input bytes are folded into the state byte (``_COMMON_INPUTS``). Addresses are written as
the distance back from the node's first byte, in the fewest bytes that hold the largest one; 0 is
the empty final node. The builder is the minimal-acyclic-transducer construction with outputs of
the Rust crate, including its node cache (10,000 buckets of 2, FNV-1a hashed, least recently used
dropped), which decides which equal nodes are shared and so the exact bytes.

With the ``ducer`` package (the Rust ``fst`` crate; a dependency, but optional at run time)
``read_keys_values`` and ``build_map`` run in Rust, about 60x faster; the Python walk and builder
here are the fallback and the reference the tests compare them with.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import ModuleType
from typing import Any, TypeVar

_T = TypeVar("_T")

_ducer: ModuleType | None
try:
    import ducer  # the Rust fst crate; optional: the Python code below does the same

    _ducer = ducer
except ImportError:  # pragma: no cover - depends on the installation
    _ducer = None

FST_VERSION = 2
_EMPTY = 0  # the address of the empty final node
_NONE = 1  # no address
_INDEX_ABOVE = 32  # AnyTrans nodes with more transitions carry a 256-byte input index
_REGISTRY_ROWS = 10_000
_REGISTRY_COLUMNS = 2
_FNV_PRIME = 1099511628211
_FNV_OFFSET = 14695981039346656037
_MASK64 = (1 << 64) - 1

# fmt: off
_COMMON_INPUTS = bytes(
    (
        84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105,
        106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 80, 117, 118, 79, 39, 30, 81, 75, 74, 82,
        57, 66, 16, 12, 2, 19, 20, 21, 27, 32, 29, 35, 36, 37, 34, 24, 73, 119, 23, 120, 40, 83, 44, 48,
        42, 43, 49, 46, 62, 61, 47, 69, 68, 58, 56, 55, 59, 51, 72, 54, 45, 52, 64, 65, 63, 71, 67, 70,
        77, 121, 78, 122, 31, 123, 4, 25, 9, 17, 1, 26, 22, 13, 7, 50, 38, 14, 15, 10, 3, 8, 60, 6, 5,
        0, 18, 33, 11, 41, 28, 53, 124, 125, 126, 76, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136,
        137, 138, 139, 140, 141, 142, 143, 144, 145, 146, 147, 148, 149, 150, 151, 152, 153, 154, 155,
        156, 157, 158, 159, 160, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 173, 174,
        175, 176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193,
        194, 195, 196, 197, 198, 199, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212,
        213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223, 224, 225, 226, 227, 228, 229, 230, 231,
        232, 233, 234, 235, 236, 237, 238, 239, 240, 241, 242, 243, 244, 245, 246, 247, 248, 249, 250,
        251, 252, 253, 254, 255,
    )
)
# fmt: on
_COMMON_INPUTS_INV = bytes(sorted(range(256), key=lambda b: _COMMON_INPUTS[b]))


class FstError(ValueError):
    """Bytes that are not an FST of this format."""


def _common_idx(byte: int, limit: int) -> int:
    idx = (_COMMON_INPUTS[byte] + 1) % 256
    return 0 if idx > limit else idx


def _pack_size(n: int) -> int:
    return max(1, (n.bit_length() + 7) // 8)


def _uint(data: bytes, at: int, size: int) -> int:
    return int.from_bytes(data[at : at + size], "little")


# --- reading ---------------------------------------------------------------------------------------


def _node(data: bytes, addr: int) -> tuple[bool, int, list[tuple[int, int, int]]]:
    """(is final, final output, [(input, output, target address)...] in input order) of a node."""
    if addr == _EMPTY:
        return True, 0, []
    state = data[addr]
    kind = state >> 6
    if kind == 0b11:  # one transition to the node just before, no output
        common = state & 0b111111
        inp = _COMMON_INPUTS_INV[common - 1] if common else data[addr - 1]
        end = addr - (0 if common else 1)
        return False, 0, [(inp, 0, end - 1)]
    if kind == 0b10:  # one transition, output and delta address
        common = state & 0b111111
        input_len = 0 if common else 1
        inp = _COMMON_INPUTS_INV[common - 1] if common else data[addr - 1]
        sizes = data[addr - input_len - 1]
        tsize, osize = sizes >> 4, sizes & 15
        at = addr - input_len - 1 - tsize
        end = at - osize
        delta = _uint(data, at, tsize)
        out = _uint(data, end, osize) if osize else 0
        return False, 0, [(inp, out, _EMPTY if delta == _EMPTY else end - delta)]
    final = bool(state & 0b01000000)
    ntrans = state & 0b111111
    ntrans_len = 0
    if ntrans == 0:
        ntrans_len = 1
        ntrans = data[addr - 1]
        if ntrans == 1:
            ntrans = 256
    sizes = data[addr - ntrans_len - 1]
    tsize, osize = sizes >> 4, sizes & 15
    index_size = 256 if ntrans > _INDEX_ABOVE else 0
    inputs_end = addr - ntrans_len - 1 - index_size  # input i is at inputs_end - i - 1
    addrs_end = inputs_end - ntrans
    outs_end = addrs_end - ntrans * tsize
    end = outs_end - ntrans * osize - (osize if final else 0)
    final_out = _uint(data, outs_end - ntrans * osize - osize, osize) if final and osize else 0
    trans = []
    for i in range(ntrans):
        at = addrs_end - (i + 1) * tsize
        delta = data[at] if tsize == 1 else int.from_bytes(data[at : at + tsize], "little")
        if osize:
            at = outs_end - (i + 1) * osize
            out = data[at] if osize == 1 else int.from_bytes(data[at : at + osize], "little")
        else:
            out = 0
        trans.append((data[inputs_end - i - 1], out, _EMPTY if delta == _EMPTY else end - delta))
    return final, final_out, trans


def read_map(data: bytes) -> list[tuple[bytes, int]]:
    """Every (key, value) of an FST map, in key order.

    Raises:
        FstError: not an FST of version 2, or nodes that do not decode.
    """
    keys, values = read_keys_values(data)
    return list(zip(keys, values, strict=True))


def read_keys_values(data: bytes) -> tuple[list[bytes], list[int]]:
    """The keys of an FST map in order, and their values: through the Rust ``fst`` crate
    (``ducer``) when it is installed, about 60x faster than ``iter_map``, which it equals.

    Raises:
        FstError: not an FST of version 2, or nodes that do not decode.
    """
    fst_map = _rust_map(data)
    if fst_map is None:
        pairs = list(iter_map(data))
        return [k for k, _ in pairs], [v for _, v in pairs]
    keys, values = _decoded(lambda: (list(fst_map.keys()), list(fst_map.values())))
    _check_count(data, len(keys))
    return keys, values


ORDINAL_SAMPLE_STEP = 1024  # read_ordinal_keys looks up every this-many-th key's value


def read_ordinal_keys(data: bytes) -> list[bytes]:
    """The keys of an FST map whose values are the key ordinals ``0..n-1`` (an FST term
    dictionary's): one walk of the keys, about half of ``read_keys_values``'s time. The values are
    not all read: the count is checked, and the ordinal of every ``ORDINAL_SAMPLE_STEP``-th key and
    of the last (all of them without ``ducer``).

    Example: ``read_ordinal_keys(build_map([(b"a", 0), (b"b", 1)]))`` is ``[b"a", b"b"]``.

    Raises:
        FstError: not an FST of version 2, nodes that do not decode, or a key whose value is not
            its ordinal.
    """
    fst_map = _rust_map(data)
    if fst_map is None:
        keys, values = read_keys_values(data)
        sampled = list(enumerate(values))
    else:
        keys = _decoded(lambda: list(fst_map.keys()))
        _check_count(data, len(keys))
        at = [*range(0, len(keys), ORDINAL_SAMPLE_STEP), len(keys) - 1] if keys else []
        values = _decoded(lambda: [fst_map.get(keys[i]) for i in at])
        sampled = list(zip(at, values, strict=True))
    bad = next(((i, v) for i, v in sampled if v != i), None)
    if bad is not None:
        raise FstError(f"key {bad[0]} has the value {bad[1]}, not its ordinal")
    return keys


def _rust_map(data: bytes) -> Any:
    """``data`` (checked: a version 2 FST, its root inside it) as a ``ducer.Map``; None without ducer."""
    _check_header(data)
    if _ducer is None:
        return None
    _, root = struct.unpack_from("<QQ", data, len(data) - 16)
    if root != _EMPTY and not 16 <= root < len(data) - 16:
        raise FstError(f"root address {root} outside the FST")
    # as version 3 (a checksum appended, which ducer does not verify on reads): the Rust crate
    # checks a version 2 map's length against a layout that small maps do not have
    return _decoded(lambda: _ducer.Map(struct.pack("<Q", 3) + data[8:] + bytes(4)))


def _decoded(read: Callable[[], _T]) -> _T:
    """``read()``, a ducer failure raised as FstError."""
    try:
        return read()
    except BaseException as e:  # ducer raises ValueError, or a pyo3 PanicException (a BaseException)
        if isinstance(e, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        raise FstError(f"the FST does not decode ({type(e).__name__}: {e})") from e


def _check_count(data: bytes, found: int) -> None:
    (count,) = struct.unpack_from("<Q", data, len(data) - 16)
    if found != count:
        raise FstError(f"the FST says {count} keys, holds {found}")


def _check_header(data: bytes) -> None:
    if len(data) < 32:
        raise FstError(f"{len(data)} bytes, too short for an FST")
    version, _ = struct.unpack_from("<QQ", data, 0)
    if version != FST_VERSION:
        raise FstError(f"FST version {version}, only {FST_VERSION} is read")


_NODE_CACHE_ENTRIES = 1 << 16


def iter_map(data: bytes) -> Iterator[tuple[bytes, int]]:
    """The (key, value) pairs of an FST map, in key order, one at a time (memory: the path being
    walked and a bounded cache of decoded nodes, not the keys).

    Raises:
        FstError: not an FST of version 2, or nodes that do not decode (raised when reached).
    """
    _check_header(data)
    count, root = struct.unpack_from("<QQ", data, len(data) - 16)
    body = data[: len(data) - 16]
    nodes: dict[int, tuple[bool, int, list[tuple[int, int, int]]]] = {}
    found = 0
    try:
        # depth-first, transitions in input order: keys come out sorted
        stack: list[tuple[bytes, int, int]] = [(b"", 0, root)]
        while stack:
            key, value, addr = stack.pop()
            node = nodes.get(addr)
            if node is None:
                if addr != _EMPTY and not 16 <= addr < len(body):
                    raise FstError(f"node address {addr} outside the FST")
                if len(nodes) >= _NODE_CACHE_ENTRIES:
                    nodes.clear()
                node = nodes[addr] = _node(body, addr)
            final, final_out, trans = node
            if final:
                found += 1
                if found > count:
                    raise FstError(f"more keys than the {count} the FST says")
                yield key, value + final_out
            for inp, t_out, target in reversed(trans):
                stack.append((key + _BYTES[inp], value + t_out, target))
    except IndexError as e:
        raise FstError(f"FST node out of bounds ({e})") from e
    if found != count:
        raise FstError(f"the FST says {count} keys, holds {found}")


_BYTES = [bytes((b,)) for b in range(256)]


# --- building --------------------------------------------------------------------------------------


class _Node:
    """A builder node: final flag, final output and transitions ``[input, output, address]``."""

    __slots__ = ("final", "final_out", "trans")

    def __init__(self, final: bool = False) -> None:
        self.final = final
        self.final_out = 0
        self.trans: list[tuple[int, int, int]] = []

    def key(self) -> tuple[bool, int, tuple[tuple[int, int, int], ...]]:
        return (self.final, self.final_out, tuple(self.trans))


class _Unfinished:
    __slots__ = ("last", "node")

    def __init__(self, node: _Node, last: list[int] | None) -> None:
        self.node = node
        self.last = last  # [input, output] of the transition not compiled yet

    def last_compiled(self, addr: int) -> None:
        if self.last is not None:
            self.node.trans.append((self.last[0], self.last[1], addr))
            self.last = None

    def add_output_prefix(self, prefix: int) -> None:
        if self.node.final:
            self.node.final_out += prefix
        self.node.trans = [(i, o + prefix, a) for i, o, a in self.node.trans]
        if self.last is not None:
            self.last[1] += prefix


def _hash(key: tuple[bool, int, tuple[tuple[int, int, int], ...]]) -> int:
    h = _FNV_OFFSET
    h = ((h ^ int(key[0])) * _FNV_PRIME) & _MASK64
    h = ((h ^ key[1]) * _FNV_PRIME) & _MASK64
    for inp, out, addr in key[2]:
        h = ((h ^ inp) * _FNV_PRIME) & _MASK64
        h = ((h ^ out) * _FNV_PRIME) & _MASK64
        h = ((h ^ addr) * _FNV_PRIME) & _MASK64
    return h % _REGISTRY_ROWS


class _Builder:
    def __init__(self) -> None:
        self.out = bytearray(struct.pack("<QQ", FST_VERSION, 0))
        self.stack = [_Unfinished(_Node(), None)]
        # registry: per bucket, most recently used first, [node key, address]
        self.registry: dict[int, list[tuple[tuple[bool, int, tuple[tuple[int, int, int], ...]], int]]] = {}
        self.last_addr = _NONE
        self.len = 0
        self.previous: bytes | None = None

    def insert(self, key: bytes, value: int) -> None:
        if self.previous is not None and key <= self.previous:
            raise FstError(f"keys not strictly increasing: {self.previous!r} then {key!r}")
        self.previous = key
        if not key:
            self.len = 1
            self.stack[0].node.final = True
            self.stack[0].node.final_out = value
            return
        i = 0
        out = value
        while i < len(key):
            last = self.stack[i].last
            if last is None or last[0] != key[i]:
                break
            i += 1
            common = min(last[1], out)
            add_prefix = last[1] - common
            out -= common
            last[1] = common
            if add_prefix:
                self.stack[i].add_output_prefix(add_prefix)
        if i == len(key):  # cannot happen with strictly increasing keys
            raise FstError(f"duplicate key {key!r}")
        self.len += 1
        self.compile_from(i)
        suffix = key[i:]
        self.stack[-1].last = [suffix[0], out]
        for b in suffix[1:]:
            self.stack.append(_Unfinished(_Node(), [b, 0]))
        self.stack.append(_Unfinished(_Node(final=True), None))

    def compile_from(self, istate: int) -> None:
        addr = _NONE
        while istate + 1 < len(self.stack):
            unfinished = self.stack.pop()
            if addr != _NONE:
                unfinished.last_compiled(addr)
            addr = self.compile(unfinished.node)
        self.stack[-1].last_compiled(addr)

    def compile(self, node: _Node) -> int:
        if node.final and not node.trans and node.final_out == 0:
            return _EMPTY
        key = node.key()
        bucket = self.registry.setdefault(_hash(key), [])
        for i, (cached, addr) in enumerate(bucket):
            if cached == key:
                bucket.insert(0, bucket.pop(i))
                return addr
        start = len(self.out)
        _compile_node(self.out, self.last_addr, start, node)
        self.last_addr = len(self.out) - 1
        if len(bucket) >= _REGISTRY_COLUMNS:
            bucket.pop()
        bucket.insert(0, (key, self.last_addr))
        return self.last_addr

    def finish(self) -> bytes:
        self.compile_from(0)
        root = self.stack.pop()
        root_addr = self.compile(root.node)
        self.out += struct.pack("<QQ", self.len, root_addr)
        return bytes(self.out)


def _delta(node_addr: int, target: int) -> int:
    return _EMPTY if target == _EMPTY else node_addr - target


def _compile_node(out: bytearray, last_addr: int, addr: int, node: _Node) -> None:
    trans = node.trans
    if len(trans) != 1 or node.final:
        _compile_any(out, addr, node)
        return
    inp, t_out, target = trans[0]
    common = _common_idx(inp, 0b111111)
    if target == last_addr and t_out == 0:  # one transition to the node just written
        if not common:
            out.append(inp)
        out.append(0b11000000 | common)
        return
    osize = 0 if t_out == 0 else _pack_size(t_out)
    if osize:
        out += t_out.to_bytes(osize, "little")
    delta = _delta(addr, target)
    tsize = _pack_size(delta)
    out += delta.to_bytes(tsize, "little")
    out.append((tsize << 4) | osize)
    if not common:
        out.append(inp)
    out.append(0b10000000 | common)


def _compile_any(out: bytearray, addr: int, node: _Node) -> None:
    trans = node.trans
    tsize = 0
    osize = _pack_size(node.final_out)
    any_outs = node.final_out != 0
    for _, t_out, target in trans:
        tsize = max(tsize, _pack_size(_delta(addr, target)))
        osize = max(osize, _pack_size(t_out))
        any_outs = any_outs or t_out != 0
    sizes = (tsize << 4) | (osize if any_outs else 0)
    state = 0b01000000 if node.final else 0
    if len(trans) <= 0b111111:
        state |= len(trans)
    if any_outs:
        if node.final:
            out += node.final_out.to_bytes(osize, "little")
        for _, t_out, _ in reversed(trans):
            out += t_out.to_bytes(osize, "little")
    for _, _, target in reversed(trans):
        out += _delta(addr, target).to_bytes(tsize, "little")
    for inp, _, _ in reversed(trans):
        out.append(inp)
    if len(trans) > _INDEX_ABOVE:
        index = bytearray(b"\xff" * 256)
        for i, (inp, _, _) in enumerate(trans):
            index[inp] = i
        out += index
    out.append(sizes)
    if state & 0b111111 == 0:
        out.append(1 if len(trans) == 256 else len(trans))
    out.append(state)


def build_map(items: Iterable[tuple[bytes, int]]) -> bytes:
    """An FST map of ``items`` (keys strictly increasing), as ``tantivy_fst::MapBuilder`` writes it.

    Through the Rust ``fst`` crate (``ducer``) when it is installed: its version 3 differs from
    version 2 only by the version number and a trailing checksum, so those are set back (the same
    bytes as ``build_python``, which a test checks).

    Raises:
        FstError: keys not strictly increasing.
    """
    if _ducer is None:
        return build_python(items)
    pairs = list(items)
    for n in range(1, len(pairs)):
        if pairs[n][0] <= pairs[n - 1][0]:
            raise FstError(f"keys not strictly increasing: {pairs[n - 1][0]!r} then {pairs[n][0]!r}")
    built = bytes(_ducer.Map.build(":memory:", iter(pairs)))
    if struct.unpack_from("<Q", built, 0)[0] != 3:
        raise FstError("ducer wrote an FST of another version than 3")
    return struct.pack("<Q", FST_VERSION) + built[8:-4]


def build_python(items: Iterable[tuple[bytes, int]]) -> bytes:
    """``build_map`` in Python (the fallback without ``ducer``).

    Raises:
        FstError: keys not strictly increasing.
    """
    builder = _Builder()
    for key, value in items:
        builder.insert(key, value)
    return builder.finish()


def keys_of(items: Sequence[tuple[bytes, int]]) -> list[bytes]:
    """The keys of ``read_map``'s result."""
    return [k for k, _ in items]
