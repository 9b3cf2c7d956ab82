//! A Quickwit split bundle opened in place as a read-only Tantivy `Directory`.
//!
//! Layout (PROTOCOL.md §4, `executor_lib/format/quickwit/bundle.py`):
//!
//! ```text
//! [file 1]...[file n][magic u32][version u32][{"files": {name: {"start", "end"}}}]
//! [u32: length of magic+version+JSON][hotcache][u32: length of hotcache]
//! ```
//!
//! Each member is a slice of the one memory-mapped file: nothing is copied or unpacked, and the
//! term dictionaries are read as the split carries them (SSTables, the `quickwit` feature).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::ops::{Deref, Range};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, FileSlice, Lock, OwnedBytes, WatchCallback, WatchHandle, WritePtr,
};

const BUNDLE_MAGIC: u32 = 0x1812_BEAE;

/// A memory map kept alive by every slice taken from it.
struct Mapped(memmap2::Mmap);

impl Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

// SAFETY: the mapping's address never moves while the value lives (it is never remapped).
unsafe impl stable_deref_trait::StableDeref for Mapped {}

/// The members of one split, each a slice of its bytes: of the one split file, or each a file of
/// its own (a split fetched by the piece: members laid out as sparse files of their full length,
/// whose absent ranges nothing reads).
#[derive(Clone)]
pub struct BundleDirectory {
    name: Arc<str>,
    files: Arc<HashMap<PathBuf, FileSlice>>,
}

impl std::fmt::Debug for BundleDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BundleDirectory({})", self.name)
    }
}

fn corrupt(name: &str, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{name}: {what}"))
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

impl BundleDirectory {
    /// Opens the split file at `path` by memory map.
    pub fn open(path: &Path) -> io::Result<BundleDirectory> {
        let file = File::open(path)?;
        // SAFETY: splits are immutable once written; a file changed under the map is damage, found
        // by the checks of the Python side (member CRCs) as for any read.
        let mmap = unsafe { memmap2::Mmap::map(&file)? };
        let name: Arc<str> = Arc::from(path.display().to_string());
        Self::over(name, OwnedBytes::new(Mapped(mmap)))
    }

    /// The members of the split whose bytes are `bytes`.
    pub fn over(name: Arc<str>, bytes: OwnedBytes) -> io::Result<BundleDirectory> {
        let ranges = parse_footer(&name, bytes.as_slice())?;
        let data = FileSlice::new(Arc::new(bytes));
        let files = ranges.into_iter().map(|(member, range)| (member, data.slice(range))).collect();
        Ok(BundleDirectory { name, files: Arc::new(files) })
    }

    /// The members `(member name, local file)` of the split `name`, each file memory-mapped.
    pub fn of_files(name: &str, members: &[(String, PathBuf)]) -> io::Result<BundleDirectory> {
        let mut files = HashMap::with_capacity(members.len());
        for (member, path) in members {
            let file = File::open(path).map_err(|e| corrupt(name, format!("{}: {e}", path.display())))?;
            let bytes = if file.metadata()?.len() == 0 {
                OwnedBytes::empty()
            } else {
                // SAFETY: as `open`; ranges fetched later are written in place and read through the map
                OwnedBytes::new(Mapped(unsafe { memmap2::Mmap::map(&file)? }))
            };
            files.insert(PathBuf::from(member), FileSlice::new(Arc::new(bytes)));
        }
        Ok(BundleDirectory { name: Arc::from(name), files: Arc::new(files) })
    }
}

fn parse_footer(name: &str, bytes: &[u8]) -> io::Result<HashMap<PathBuf, Range<usize>>> {
    let n = bytes.len();
    if n < 8 {
        return Err(corrupt(name, format!("{n} bytes: too short for a split's footer")));
    }
    let hot_len = u32_at(bytes, n - 4) as usize;
    let meta_end = n
        .checked_sub(4 + hot_len)
        .filter(|&e| e >= 4)
        .ok_or_else(|| corrupt(name, "hotcache length past the file's start"))?;
    let meta_len = u32_at(bytes, meta_end - 4) as usize;
    let meta_start = (meta_end - 4)
        .checked_sub(meta_len)
        .filter(|_| meta_len >= 8)
        .ok_or_else(|| corrupt(name, "bundle metadata length past the file's start"))?;
    let meta = &bytes[meta_start..meta_end - 4];
    if u32_at(meta, 0) != BUNDLE_MAGIC {
        return Err(corrupt(name, "no split bundle magic"));
    }
    let table: Value = serde_json::from_slice(&meta[8..]).map_err(|e| corrupt(name, format!("bundle metadata: {e}")))?;
    let members = table
        .get("files")
        .and_then(Value::as_object)
        .ok_or_else(|| corrupt(name, "bundle metadata lists no files"))?;
    let mut files = HashMap::with_capacity(members.len());
    for (member, range) in members {
        let start = range.get("start").and_then(Value::as_u64);
        let end = range.get("end").and_then(Value::as_u64);
        match (start, end) {
            (Some(s), Some(e)) if s <= e && (e as usize) <= meta_start => {
                files.insert(PathBuf::from(member), s as usize..e as usize);
            }
            _ => return Err(corrupt(name, format!("member {member:?}: range {range} outside the split's files"))),
        }
    }
    Ok(files)
}

impl Directory for BundleDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        let slice = self
            .files
            .get(path)
            .ok_or_else(|| OpenReadError::FileDoesNotExist(path.to_path_buf()))?;
        Ok(Arc::new(slice.clone()))
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        Err(DeleteError::IoError {
            io_error: Arc::new(io::Error::new(io::ErrorKind::PermissionDenied, "a split is read-only")),
            filepath: path.to_path_buf(),
        })
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        Ok(self.files.contains_key(path))
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        Err(OpenWriteError::IoError {
            io_error: Arc::new(io::Error::new(io::ErrorKind::PermissionDenied, "a split is read-only")),
            filepath: path.to_path_buf(),
        })
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        let slice = self.open_read(path)?;
        let bytes = slice
            .read_bytes()
            .map_err(|io_error| OpenReadError::wrap_io_error(io_error, path.to_path_buf()))?;
        Ok(bytes.as_slice().to_vec())
    }

    fn atomic_write(&self, _path: &Path, _data: &[u8]) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::PermissionDenied, "a split is read-only"))
    }

    fn sync_directory(&self) -> io::Result<()> {
        Ok(())
    }

    /// Nothing writes a split: a reader's lock guards nothing (as Quickwit's BundleDirectory).
    fn acquire_lock(&self, _lock: &Lock) -> Result<DirectoryLock, LockError> {
        Ok(DirectoryLock::from(Box::new(())))
    }

    fn watch(&self, _watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        Ok(WatchHandle::empty())
    }
}
