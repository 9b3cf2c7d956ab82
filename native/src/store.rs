//! Tantivy's doc store (`<segment>.store`) re-written with zstd blocks that carry a frame
//! checksum: the one pass over a split's rows that is this project's and not Tantivy's. Tantivy's
//! own zstd compressor (`src/store/compression_zstd_block.rs`) writes frames without a checksum,
//! and this project's readers check every block they decompress (PROTOCOL.md, "Doc stores"), so
//! the index writer has Tantivy write its stores uncompressed and `zstd_store` compresses them.
//!
//! The layout (Tantivy's `src/store/`, as `executor_lib/format/store/blocks.py` reads it),
//! little-endian:
//!
//! ```text
//! store      = [block 0][block 1]...[skip index][doc store footer][Tantivy file footer]
//! block      = [u32 uncompressed length][zstd frame]    (compressor 4; 0: the raw bytes alone)
//! skip index = [VInt layers][VInt end offset of each layer][layers, the coarsest first]
//! layer      = checkpoint blocks of at most 8 checkpoints:
//!              [VInt n][VInt first doc][VInt first byte][(VInt docs, VInt bytes) x n]
//! footer     = [u32 doc store version][u64 skip index offset][u8 compressor id][15 zero bytes]
//! ```
//!
//! Blocks are compressed one for one (Tantivy cut them at the writer's block size), on up to
//! `threads` threads; documents, checkpoints' doc ranges and the doc store version stay as they
//! were.

use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use tantivy::directory::footer::Footer;

const FOOTER_MAGIC: u32 = 1337;
const DOC_STORE_FOOTER_BYTES: usize = 28;
const CHECKPOINT_PERIOD: usize = 8;
const COMPRESSOR_NONE: u8 = 0;
const COMPRESSOR_ZSTD: u8 = 4;

/// A block of documents `docs` at bytes `bytes` of the store's block area.
#[derive(Clone, Debug, PartialEq)]
struct Checkpoint {
    docs: std::ops::Range<u64>,
    bytes: std::ops::Range<u64>,
}

fn corrupt(path: &Path, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what}", path.display()))
}

fn read_vint(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *data.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 127) << shift;
        if byte >= 128 {
            return Some(value);
        }
    }
    None
}

fn write_vint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 128 {
        out.push((value & 127) as u8);
        value >>= 7;
    }
    out.push(value as u8 | 128);
}

/// The checkpoints of a skip index's finest layer (the last one), or None if it does not parse.
fn layer0(skip: &[u8]) -> Option<Vec<Checkpoint>> {
    let mut pos = 0;
    let layers = read_vint(skip, &mut pos)? as usize;
    let ends = (0..layers).map(|_| read_vint(skip, &mut pos).map(|e| e as usize)).collect::<Option<Vec<_>>>()?;
    let Some(&end) = ends.last() else { return Some(Vec::new()) };
    let start = if layers > 1 { ends[layers - 2] } else { 0 };
    if pos + end != skip.len() || start > end {
        return None;
    }
    let layer = &skip[pos + start..pos + end];
    let (mut out, mut p) = (Vec::new(), 0);
    while p < layer.len() {
        let n = read_vint(layer, &mut p)?;
        let (mut doc, mut byte) = (read_vint(layer, &mut p)?, read_vint(layer, &mut p)?);
        for _ in 0..n {
            let (docs, size) = (read_vint(layer, &mut p)?, read_vint(layer, &mut p)?);
            out.push(Checkpoint { docs: doc..doc + docs, bytes: byte..byte + size });
            (doc, byte) = (doc + docs, byte + size);
        }
    }
    Some(out)
}

/// The skip index of these checkpoints, as Tantivy's `SkipIndexBuilder::serialize_into` writes it.
fn skip_index(checkpoints: &[Checkpoint]) -> Vec<u8> {
    let mut layers: Vec<Vec<u8>> = Vec::new();
    let mut pending: Vec<Vec<Checkpoint>> = Vec::new();
    fn flush(layer: &mut Vec<u8>, block: &mut Vec<Checkpoint>) -> Option<Checkpoint> {
        let (first, last) = (block.first()?.clone(), block.last()?.clone());
        let start = layer.len() as u64;
        write_vint(block.len() as u64, layer);
        write_vint(first.docs.start, layer);
        write_vint(first.bytes.start, layer);
        for c in block.iter() {
            write_vint(c.docs.end - c.docs.start, layer);
            write_vint(c.bytes.end - c.bytes.start, layer);
        }
        block.clear();
        Some(Checkpoint { docs: first.docs.start..last.docs.end, bytes: start..layer.len() as u64 })
    }
    for checkpoint in checkpoints {
        let mut up = Some(checkpoint.clone());
        let mut level = 0;
        while let Some(c) = up.take() {
            if level == layers.len() {
                layers.push(Vec::new());
                pending.push(Vec::new());
            }
            pending[level].push(c);
            if pending[level].len() >= CHECKPOINT_PERIOD {
                up = flush(&mut layers[level], &mut pending[level]);
            }
            level += 1;
        }
    }
    let mut last = None;
    for level in 0..layers.len() {
        if let Some(c) = last.take() {
            pending[level].push(c);
        }
        last = flush(&mut layers[level], &mut pending[level]);
    }
    let mut out = Vec::new();
    write_vint(layers.len() as u64, &mut out);
    let mut total = 0;
    for layer in layers.iter().rev() {
        total += layer.len() as u64;
        write_vint(total, &mut out);
    }
    for layer in layers.iter().rev() {
        out.extend_from_slice(layer);
    }
    out
}

/// A store file split into its Tantivy footer, its blocks and their checkpoints, and its doc
/// store version (InvalidData naming `path` when it does not parse or is not uncompressed).
fn parse<'a>(data: &'a [u8], path: &Path) -> io::Result<(Footer, &'a [u8], Vec<Checkpoint>, [u8; 4])> {
    let n = data.len();
    if n < 8 {
        return Err(corrupt(path, "too short for a Tantivy file footer"));
    }
    let json_len = u32::from_le_bytes(data[n - 8..n - 4].try_into().unwrap()) as usize;
    let magic = u32::from_le_bytes(data[n - 4..].try_into().unwrap());
    if magic != FOOTER_MAGIC || json_len + 8 + DOC_STORE_FOOTER_BYTES > n {
        return Err(corrupt(path, format!("no Tantivy file footer (magic {magic}, length {json_len})")));
    }
    let footer: Footer = serde_json::from_slice(&data[n - 8 - json_len..n - 8])
        .map_err(|e| corrupt(path, format!("Tantivy file footer does not parse ({e})")))?;
    let body = &data[..n - 8 - json_len];
    let store_footer = &body[body.len() - DOC_STORE_FOOTER_BYTES..];
    let version: [u8; 4] = store_footer[..4].try_into().unwrap();
    let offset = u64::from_le_bytes(store_footer[4..12].try_into().unwrap()) as usize;
    let compressor = store_footer[12];
    if compressor != COMPRESSOR_NONE || offset > body.len() - DOC_STORE_FOOTER_BYTES {
        return Err(corrupt(path, format!("not an uncompressed doc store (compressor {compressor}, offset {offset})")));
    }
    let checkpoints = layer0(&body[offset..body.len() - DOC_STORE_FOOTER_BYTES])
        .ok_or_else(|| corrupt(path, "doc store skip index does not parse"))?;
    let tiles = checkpoints.first().is_none_or(|c| c.docs.start == 0 && c.bytes.start == 0)
        && checkpoints.windows(2).all(|w| w[0].docs.end == w[1].docs.start && w[0].bytes.end == w[1].bytes.start)
        && checkpoints.last().is_none_or(|c| c.bytes.end as usize == offset);
    if !tiles {
        return Err(corrupt(path, format!("doc store checkpoints do not tile its {offset} bytes of blocks")));
    }
    Ok((footer, &data[..offset], checkpoints, version))
}

/// Each block compressed (u32 length, then a zstd frame with its checksum), on up to `threads`
/// threads taking blocks in turn.
fn compress_blocks(blocks: &[u8], checkpoints: &[Checkpoint], level: i32, threads: usize) -> io::Result<Vec<Vec<u8>>> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<Vec<u8>>>> = Mutex::new(vec![None; checkpoints.len()]);
    std::thread::scope(|scope| -> io::Result<()> {
        let workers: Vec<_> = (0..threads.clamp(1, checkpoints.len().max(1)))
            .map(|_| {
                scope.spawn(|| -> io::Result<()> {
                    let mut compressor = zstd::bulk::Compressor::new(level)?;
                    compressor.include_checksum(true)?;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(c) = checkpoints.get(i) else { return Ok(()) };
                        let raw = &blocks[c.bytes.start as usize..c.bytes.end as usize];
                        let mut block = (raw.len() as u32).to_le_bytes().to_vec();
                        block.extend(compressor.compress(raw)?);
                        out.lock().unwrap()[i] = Some(block);
                    }
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| w.join().expect("a zstd thread panicked"))
    })?;
    Ok(out.into_inner().unwrap().into_iter().map(|b| b.expect("every block compressed")).collect())
}

/// Re-writes the uncompressed doc store at `path` in place (through `<path>.zstd`, renamed over
/// it) with each block a zstd frame of `level` with its checksum, on up to `threads` threads.
pub fn zstd_store(path: &Path, level: i32, threads: usize) -> io::Result<()> {
    let data = fs::read(path)?;
    let (footer, blocks, checkpoints, version) = parse(&data, path)?;
    let compressed = compress_blocks(blocks, &checkpoints, level, threads)?;
    let mut body = Vec::with_capacity(compressed.iter().map(Vec::len).sum::<usize>() + 4096);
    let mut moved = Vec::with_capacity(checkpoints.len());
    for (c, block) in checkpoints.iter().zip(&compressed) {
        let start = body.len() as u64;
        body.extend_from_slice(block);
        moved.push(Checkpoint { docs: c.docs.clone(), bytes: start..body.len() as u64 });
    }
    let offset = body.len() as u64;
    body.extend(skip_index(&moved));
    body.extend_from_slice(&version);
    body.extend_from_slice(&offset.to_le_bytes());
    body.push(COMPRESSOR_ZSTD);
    body.extend_from_slice(&[0; 15]);
    let footer = Footer { version: footer.version, crc: crc32fast::hash(&body) };
    let json = serde_json::to_vec(&footer).map_err(io::Error::other)?;
    let tmp = path.with_extension("store.zstd");
    let mut file = fs::File::create(&tmp)?;
    file.write_all(&body)?;
    file.write_all(&json)?;
    file.write_all(&(json.len() as u32).to_le_bytes())?;
    file.write_all(&FOOTER_MAGIC.to_le_bytes())?;
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoints(sizes: &[(u64, u64)]) -> Vec<Checkpoint> {
        let (mut doc, mut byte, mut out) = (0, 0, Vec::new());
        for &(docs, bytes) in sizes {
            out.push(Checkpoint { docs: doc..doc + docs, bytes: byte..byte + bytes });
            (doc, byte) = (doc + docs, byte + bytes);
        }
        out
    }

    #[test]
    fn a_skip_index_reads_back_its_finest_layer() {
        for n in [0, 1, 7, 8, 9, 64, 65, 513] {
            let cps = checkpoints(&(0..n).map(|i| (3 + i % 5, 70_000 + i)).collect::<Vec<_>>());
            assert_eq!(layer0(&skip_index(&cps)).unwrap(), cps, "{n} checkpoints");
        }
    }
}
