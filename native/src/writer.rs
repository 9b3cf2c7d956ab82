//! Arrow in, Tantivy index out (issue 72): `IndexWriter` indexes Arrow record batches into a new
//! Tantivy index in a directory, row by row in Rust, per the schema the Python side builds from
//! the doc mapping (`executor_lib/splits/write/schema.py`). Nothing about a row passes through
//! Python: a batch arrives through the Arrow C data interface (`__arrow_c_array__`), the GIL is
//! released while it is indexed, and Tantivy's own threads index the documents.
//!
//! Term dictionaries are written as SSTables (the tantivy crate's `quickwit` feature: the form a
//! split carries, read by Quickwit and IndexTables4Spark). Doc stores are written uncompressed in
//! blocks of `docstore_blocksize`, and `commit` compresses each block with zstd and a frame
//! checksum (`store.rs`), which Tantivy's own zstd compressor leaves out.
//!
//! How a column becomes field values (as `splits/write/writer.py` did through the `tantivy`
//! package): text and exact strings as text; every integer as i64/u64 (a u64 field refuses a
//! negative value); floats and decimals as f64; dates and timestamps of any unit as microseconds
//! (UTC); binary as bytes; an `ip` field parses its strings (IPv4 mapped into IPv6); a JSON field
//! takes structs and maps as objects (map keys as text), a list of scalars as
//! `{"_values": [...]}`, a list of structs as one object per element, and a string column as JSON
//! text: an object as itself, another JSON value as `{"_values": [...]}`, text that is not JSON as
//! `{"_raw": text}` (IndexTables4Spark's forms). Null values are left out.

use std::net::{IpAddr, Ipv6Addr};
use std::path::{Path, PathBuf};

use arrow_array::array::{
    Array, ArrayRef, BinaryArray, BinaryViewArray, BooleanArray, Decimal128Array, FixedSizeBinaryArray,
    LargeBinaryArray, LargeStringArray, StringArray, StringViewArray, StructArray,
};
use arrow_array::cast::AsArray;
use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::types::{
    Date32Type, Date64Type, Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};
use arrow_schema::{DataType, TimeUnit};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use serde_json::Value;
use tantivy::schema::{Field, FieldType, OwnedValue, Schema};
use tantivy::store::Compressor;
use tantivy::index::SegmentComponent;
use tantivy::{DateTime, Index, IndexSettings, TantivyDocument};

use crate::register_analyzers;
use crate::store::zstd_store;

const ARRAY_KEY: &str = "_values";
const RAW_KEY: &str = "_raw";

type Adder<'a> = Box<dyn Fn(usize, &mut TantivyDocument) -> Result<(), String> + 'a>;

/// A string-like column (utf8, large utf8, utf8 view) read by row.
enum Strings<'a> {
    Small(&'a StringArray),
    Large(&'a LargeStringArray),
    View(&'a StringViewArray),
}

impl<'a> Strings<'a> {
    fn of(array: &'a dyn Array) -> Option<Strings<'a>> {
        Some(match array.data_type() {
            DataType::Utf8 => Strings::Small(array.as_string::<i32>()),
            DataType::LargeUtf8 => Strings::Large(array.as_string::<i64>()),
            DataType::Utf8View => Strings::View(array.as_string_view()),
            _ => return None,
        })
    }

    fn value(&self, row: usize) -> &'a str {
        match self {
            Strings::Small(a) => a.value(row),
            Strings::Large(a) => a.value(row),
            Strings::View(a) => a.value(row),
        }
    }
}

/// A binary column read by row.
fn binary_value(array: &dyn Array, row: usize) -> Option<&[u8]> {
    let any = array.as_any();
    if let Some(a) = any.downcast_ref::<BinaryArray>() {
        return Some(a.value(row));
    }
    if let Some(a) = any.downcast_ref::<LargeBinaryArray>() {
        return Some(a.value(row));
    }
    if let Some(a) = any.downcast_ref::<BinaryViewArray>() {
        return Some(a.value(row));
    }
    any.downcast_ref::<FixedSizeBinaryArray>().map(|a| a.value(row))
}

/// A signed or unsigned integer of an integer column, widened.
fn int_value(array: &dyn Array, row: usize) -> Option<i128> {
    Some(match array.data_type() {
        DataType::Int8 => array.as_primitive::<Int8Type>().value(row).into(),
        DataType::Int16 => array.as_primitive::<Int16Type>().value(row).into(),
        DataType::Int32 => array.as_primitive::<Int32Type>().value(row).into(),
        DataType::Int64 => array.as_primitive::<Int64Type>().value(row).into(),
        DataType::UInt8 => array.as_primitive::<UInt8Type>().value(row).into(),
        DataType::UInt16 => array.as_primitive::<UInt16Type>().value(row).into(),
        DataType::UInt32 => array.as_primitive::<UInt32Type>().value(row).into(),
        DataType::UInt64 => array.as_primitive::<UInt64Type>().value(row).into(),
        _ => return None,
    })
}

/// A float (or decimal, correctly rounded from its digits) column's value as f64.
fn float_value(array: &dyn Array, row: usize) -> Option<f64> {
    Some(match array.data_type() {
        DataType::Float16 => array.as_primitive::<Float16Type>().value(row).to_f64(),
        DataType::Float32 => array.as_primitive::<Float32Type>().value(row) as f64,
        DataType::Float64 => array.as_primitive::<Float64Type>().value(row),
        DataType::Decimal128(_, scale) => {
            let raw = array.as_any().downcast_ref::<Decimal128Array>()?.value(row);
            format!("{raw}e{}", -(*scale as i32)).parse().ok()?
        }
        _ => return int_value(array, row).map(|v| v as f64),
    })
}

/// A date or timestamp column's value as microseconds since the epoch (UTC).
fn micros_value(array: &dyn Array, row: usize) -> Option<i64> {
    Some(match array.data_type() {
        DataType::Date32 => i64::from(array.as_primitive::<Date32Type>().value(row)) * 86_400_000_000,
        DataType::Date64 => array.as_primitive::<Date64Type>().value(row) * 1000,
        DataType::Timestamp(TimeUnit::Second, _) => array.as_primitive::<TimestampSecondType>().value(row) * 1_000_000,
        DataType::Timestamp(TimeUnit::Millisecond, _) => array.as_primitive::<TimestampMillisecondType>().value(row) * 1000,
        DataType::Timestamp(TimeUnit::Microsecond, _) => array.as_primitive::<TimestampMicrosecondType>().value(row),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            array.as_primitive::<TimestampNanosecondType>().value(row).div_euclid(1000)
        }
        _ => return None,
    })
}

/// Microseconds as Tantivy's date (nanoseconds in an i64: 1677-09-21 to 2262-04-11), or an error
/// naming the column.
fn date_value(column: &str, micros: i64) -> Result<DateTime, String> {
    if micros.checked_mul(1000).is_none() {
        return Err(format!(
            "column {column}: {micros} microseconds since 1970 is outside the dates Tantivy holds (1677-09-21 to 2262-04-11)"
        ));
    }
    Ok(DateTime::from_timestamp_micros(micros))
}

fn parse_ip(text: &str) -> Option<Ipv6Addr> {
    Some(match text.trim().parse::<IpAddr>().ok()? {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    })
}

/// A JSON text value as Tantivy's.
fn from_json(value: Value) -> OwnedValue {
    match value {
        Value::Null => OwnedValue::Null,
        Value::Bool(b) => OwnedValue::Bool(b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                OwnedValue::I64(i)
            } else if let Some(u) = n.as_u64() {
                OwnedValue::U64(u)
            } else {
                OwnedValue::F64(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => OwnedValue::Str(s),
        Value::Array(items) => OwnedValue::Array(items.into_iter().map(from_json).collect()),
        Value::Object(map) => OwnedValue::Object(map.into_iter().map(|(k, v)| (k, from_json(v))).collect()),
    }
}

/// A JSON field's string value: an object as itself, another JSON value under `_values`, text
/// that is not JSON under `_raw`.
fn json_text(text: &str) -> OwnedValue {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => from_json(Value::Object(map)),
        Ok(Value::Array(items)) => OwnedValue::Object(vec![(ARRAY_KEY.into(), from_json(Value::Array(items)))]),
        Ok(other) => OwnedValue::Object(vec![(ARRAY_KEY.into(), OwnedValue::Array(vec![from_json(other)]))]),
        Err(_) => OwnedValue::Object(vec![(RAW_KEY.into(), OwnedValue::Str(text.to_string()))]),
    }
}

/// A map key as text, as Python's `str()` writes a key (`True`, `1`, `1.5`).
fn key_text(array: &dyn Array, row: usize) -> String {
    match nested_value(array, row) {
        OwnedValue::Str(s) => s,
        OwnedValue::Bool(b) => if b { "True" } else { "False" }.to_string(),
        OwnedValue::I64(i) => i.to_string(),
        OwnedValue::U64(u) => u.to_string(),
        OwnedValue::F64(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e16 => format!("{f:.1}"),
        OwnedValue::F64(f) => f.to_string(),
        OwnedValue::Null => "None".to_string(),
        other => format!("{other:?}"),
    }
}

/// The value at `row` of a column nested in a JSON field (null as `Null`).
fn nested_value(array: &dyn Array, row: usize) -> OwnedValue {
    if array.is_null(row) {
        return OwnedValue::Null;
    }
    if let Some(strings) = Strings::of(array) {
        return OwnedValue::Str(strings.value(row).to_string());
    }
    if let Some(i) = int_value(array, row) {
        return match i64::try_from(i) {
            Ok(v) => OwnedValue::I64(v),
            Err(_) => OwnedValue::U64(i as u64),
        };
    }
    if let Some(micros) = micros_value(array, row) {
        return OwnedValue::Date(DateTime::from_timestamp_micros(micros));
    }
    match array.data_type() {
        DataType::Boolean => OwnedValue::Bool(array.as_any().downcast_ref::<BooleanArray>().map(|a| a.value(row)).unwrap_or(false)),
        DataType::Struct(fields) => {
            let s = array.as_struct();
            OwnedValue::Object(
                fields.iter().zip(s.columns()).map(|(f, c)| (f.name().clone(), nested_value(c.as_ref(), row))).collect(),
            )
        }
        DataType::Map(_, _) => {
            let m = array.as_map();
            let entries = m.value(row);
            let (keys, values) = (entries.column(0), entries.column(1));
            OwnedValue::Object(
                (0..entries.len()).map(|i| (key_text(keys.as_ref(), i), nested_value(values.as_ref(), i))).collect(),
            )
        }
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _) => {
            let items = list_items(array, row);
            OwnedValue::Array((0..items.len()).map(|i| nested_value(items.as_ref(), i)).collect())
        }
        _ => match float_value(array, row) {
            Some(f) => OwnedValue::F64(f),
            None => match binary_value(array, row) {
                Some(b) => OwnedValue::Bytes(b.to_vec()),
                None => OwnedValue::Null,
            },
        },
    }
}

fn list_items(array: &dyn Array, row: usize) -> ArrayRef {
    match array.data_type() {
        DataType::LargeList(_) => array.as_list::<i64>().value(row),
        DataType::FixedSizeList(_, _) => array.as_fixed_size_list().value(row),
        _ => array.as_list::<i32>().value(row),
    }
}

fn is_list(t: &DataType) -> bool {
    matches!(t, DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _))
}

/// Adds the value at `row` of a JSON field's column: see the module's documentation.
fn add_json(field: Field, array: &dyn Array, row: usize, doc: &mut TantivyDocument) {
    if let Some(strings) = Strings::of(array) {
        doc.add_field_value(field, &json_text(strings.value(row)));
        return;
    }
    if is_list(array.data_type()) {
        let items = list_items(array, row);
        if matches!(items.data_type(), DataType::Struct(_)) {
            for i in 0..items.len() {
                if !items.is_null(i) {
                    doc.add_field_value(field, &nested_value(items.as_ref(), i));
                }
            }
        } else {
            let values = OwnedValue::Array((0..items.len()).map(|i| nested_value(items.as_ref(), i)).collect());
            doc.add_field_value(field, &OwnedValue::Object(vec![(ARRAY_KEY.into(), values)]));
        }
        return;
    }
    doc.add_field_value(field, &nested_value(array, row));
}

/// How column `name` (of type `array`'s) becomes values of `field`; an error naming both when the
/// field cannot take the column's type. A list column of a field that is not JSON gives the field
/// each of its values (a multi-valued field, as tantivy4java's companion hashes are).
fn adder<'a>(schema: &Schema, field: Field, name: &str, array: &'a dyn Array) -> Result<Adder<'a>, String> {
    let entry = schema.get_field_entry(field);
    if is_list(array.data_type()) && !matches!(entry.field_type(), FieldType::JsonObject(_)) {
        let (values, offsets): (&'a dyn Array, Vec<usize>) = match array.data_type() {
            DataType::LargeList(_) => {
                let list = array.as_list::<i64>();
                (list.values().as_ref(), list.value_offsets().iter().map(|&o| o as usize).collect())
            }
            DataType::List(_) => {
                let list = array.as_list::<i32>();
                (list.values().as_ref(), list.value_offsets().iter().map(|&o| o as usize).collect())
            }
            _ => return Err(format!("column {name} of type {} cannot be indexed", array.data_type())),
        };
        let item = adder(schema, field, name, values)?;
        return Ok(Box::new(move |row, doc| {
            if array.is_null(row) {
                return Ok(());
            }
            (offsets[row]..offsets[row + 1]).try_for_each(|i| item(i, doc))
        }));
    }
    let refused = || format!("column {name} of type {} cannot be indexed as a {:?} field", array.data_type(), entry.field_type().value_type());
    let t = array.data_type().clone();
    let body: Adder<'a> = match entry.field_type() {
        FieldType::Str(_) => {
            let strings = Strings::of(array).ok_or_else(refused)?;
            Box::new(move |row, doc| {
                doc.add_text(field, strings.value(row));
                Ok(())
            })
        }
        FieldType::I64(_) => {
            if !t.is_integer() {
                return Err(refused());
            }
            let name = name.to_string();
            Box::new(move |row, doc| {
                let v = int_value(array, row).unwrap_or_default();
                doc.add_i64(field, i64::try_from(v).map_err(|_| format!("column {name}: {v} does not fit a 64-bit integer"))?);
                Ok(())
            })
        }
        FieldType::U64(_) => {
            if !t.is_integer() {
                return Err(refused());
            }
            let name = name.to_string();
            Box::new(move |row, doc| {
                let v = int_value(array, row).unwrap_or_default();
                doc.add_u64(field, u64::try_from(v).map_err(|_| format!("column {name}: {v} is not an unsigned 64-bit integer"))?);
                Ok(())
            })
        }
        FieldType::F64(_) => {
            if !(t.is_floating() || t.is_integer() || matches!(t, DataType::Decimal128(_, _))) {
                return Err(refused());
            }
            Box::new(move |row, doc| {
                doc.add_f64(field, float_value(array, row).unwrap_or(f64::NAN));
                Ok(())
            })
        }
        FieldType::Bool(_) => {
            let bools = array.as_any().downcast_ref::<BooleanArray>().ok_or_else(refused)?;
            Box::new(move |row, doc| {
                doc.add_bool(field, bools.value(row));
                Ok(())
            })
        }
        FieldType::Date(_) => {
            if !matches!(t, DataType::Date32 | DataType::Date64 | DataType::Timestamp(_, _)) {
                return Err(refused());
            }
            let name = name.to_string();
            Box::new(move |row, doc| {
                doc.add_date(field, date_value(&name, micros_value(array, row).unwrap_or_default())?);
                Ok(())
            })
        }
        FieldType::Bytes(_) => {
            if !matches!(t, DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_)) {
                return Err(refused());
            }
            Box::new(move |row, doc| {
                doc.add_bytes(field, binary_value(array, row).unwrap_or_default());
                Ok(())
            })
        }
        FieldType::IpAddr(_) => {
            let strings = Strings::of(array).ok_or_else(refused)?;
            let name = name.to_string();
            Box::new(move |row, doc| {
                let text = strings.value(row);
                let ip = parse_ip(text).ok_or_else(|| format!("column {name}: {text:?} is not an IP address"))?;
                doc.add_ip_addr(field, ip);
                Ok(())
            })
        }
        FieldType::JsonObject(_) => Box::new(move |row, doc| {
            add_json(field, array, row, doc);
            Ok(())
        }),
        _ => return Err(refused()),
    };
    Ok(Box::new(move |row, doc| if array.is_null(row) { Ok(()) } else { body(row, doc) }))
}

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A new Tantivy index in a directory, fed Arrow record batches.
#[pyclass(module = "indextables_native")]
pub struct IndexWriter {
    writer: Option<tantivy::IndexWriter<TantivyDocument>>,
    schema: Schema,
    row_field: Option<Field>,
    path: PathBuf,
    threads: usize,
}

#[pymethods]
impl IndexWriter {
    /// Creates the index in the empty directory `path` with `schema_json` (a Tantivy schema as
    /// its `meta.json` lists it), doc store blocks of `block_bytes` uncompressed, and a writer of
    /// `threads` threads sharing `heap_bytes`. `row_field`: a u64 fast field of the schema that
    /// numbers each document (`add`'s `first_row`).
    #[new]
    #[pyo3(signature = (path, schema_json, heap_bytes, threads, block_bytes, row_field=None))]
    fn new(
        path: &str,
        schema_json: &str,
        heap_bytes: usize,
        threads: usize,
        block_bytes: usize,
        row_field: Option<&str>,
    ) -> PyResult<IndexWriter> {
        let schema: Schema = serde_json::from_str(schema_json).map_err(|e| value_error(format!("index schema: {e}")))?;
        let row_field = match row_field {
            None => None,
            Some(name) => Some(schema.get_field(name).map_err(value_error)?),
        };
        let settings = IndexSettings { docstore_compression: Compressor::None, docstore_blocksize: block_bytes, ..IndexSettings::default() };
        let index = Index::builder()
            .schema(schema.clone())
            .settings(settings)
            .create_in_dir(Path::new(path))
            .map_err(|e| PyOSError::new_err(format!("{path}: the index cannot be created ({e})")))?;
        register_analyzers(&index);
        let writer = index.writer_with_num_threads(threads.max(1), heap_bytes).map_err(value_error)?;
        Ok(IndexWriter { writer: Some(writer), schema, row_field, path: PathBuf::from(path), threads: threads.max(1) })
    }

    /// Indexes the record batch `batch` (anything with `__arrow_c_array__`, e.g. a
    /// `pyarrow.RecordBatch`) whose columns are named as the schema's fields (other columns:
    /// ValueError); documents numbered from `first_row` in the row field. ValueError naming the
    /// row (of the batch) and column of a value that cannot be indexed.
    #[pyo3(signature = (batch, first_row=None))]
    fn add(&mut self, py: Python<'_>, batch: &Bound<'_, PyAny>, first_row: Option<u64>) -> PyResult<u64> {
        let columns = import_batch(batch)?;
        let writer = self.writer.as_ref().ok_or_else(|| value_error("the index writer is closed"))?;
        let (schema, row_field) = (&self.schema, self.row_field);
        py.detach(|| -> PyResult<u64> {
            let mut adders = Vec::with_capacity(columns.num_columns());
            for (name, array) in columns.column_names().iter().zip(columns.columns()) {
                let field = schema.get_field(name).map_err(|_| value_error(format!("column {name} is not a field of the index")))?;
                adders.push(adder(schema, field, name, array.as_ref()).map_err(value_error)?);
            }
            for row in 0..columns.len() {
                let mut doc = TantivyDocument::new();
                for add in &adders {
                    add(row, &mut doc).map_err(|e| value_error(format!("row {row} of the batch cannot be indexed: {e}")))?;
                }
                if let (Some(field), Some(first)) = (row_field, first_row) {
                    doc.add_u64(field, first + row as u64);
                }
                writer.add_document(doc).map_err(value_error)?;
            }
            Ok(columns.len() as u64)
        })
    }

    /// Commits what was added, waits for Tantivy's merges and compresses each segment's doc store
    /// with zstd (`level`) and frame checksums on the writer's threads; the writer is closed.
    #[pyo3(signature = (zstd_level=3))]
    fn commit(&mut self, py: Python<'_>, zstd_level: i32) -> PyResult<()> {
        let mut writer = self.writer.take().ok_or_else(|| value_error("the index writer is closed"))?;
        let (path, threads) = (&self.path, self.threads);
        py.detach(|| -> PyResult<()> {
            let index = writer.index().clone();
            writer.commit().map_err(value_error)?;
            writer.wait_merging_threads().map_err(value_error)?;
            for segment in index.searchable_segment_metas().map_err(value_error)? {
                let store = path.join(segment.relative_path(SegmentComponent::Store));
                zstd_store(&store, zstd_level, threads).map_err(|e| PyOSError::new_err(e.to_string()))?;
            }
            Ok(())
        })
    }
}

/// A record batch from its Arrow C data interface capsules, as a struct array.
fn import_batch(batch: &Bound<'_, PyAny>) -> PyResult<StructArray> {
    let capsules = batch.call_method0("__arrow_c_array__")?;
    let (schema_capsule, array_capsule): (Bound<'_, PyCapsule>, Bound<'_, PyCapsule>) = capsules.extract()?;
    let schema_ptr = schema_capsule.pointer_checked(Some(c"arrow_schema"))?.as_ptr() as *const FFI_ArrowSchema;
    let array_ptr = array_capsule.pointer_checked(Some(c"arrow_array"))?.as_ptr() as *mut FFI_ArrowArray;
    // SAFETY: the capsules hold an exported schema and array (the C data interface); the array is
    // moved out (the capsule keeps a released one, which its destructor leaves alone).
    let mut data = unsafe {
        let array = std::ptr::replace(array_ptr, FFI_ArrowArray::empty());
        from_ffi(array, &*schema_ptr)
    }
    .map_err(|e| value_error(format!("an Arrow batch that does not import: {e}")))?;
    // Spark's Arrow batches may hold a buffer less aligned than its type needs (decimal128 at 8
    // bytes): such buffers are copied, the others used in place
    data.align_buffers();
    if !matches!(data.data_type(), DataType::Struct(_)) {
        return Err(value_error("expected a record batch (a struct array)"));
    }
    Ok(StructArray::from(data))
}
