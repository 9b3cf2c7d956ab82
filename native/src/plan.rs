//! A query plan (JSON, built by `executor_lib/splits/query/plan.py`) compiled to a Tantivy query
//! against one split's schema. Each node is a JSON list whose first item names it:
//!
//! ```text
//! ["all"] ["empty"] ["bool", [[occur, node], ...]] ["boost", node, f] ["const", node, f]
//! ["term", field, value] ["terms", field, [value, ...]] ["phrase", field, [text, ...], slop] ["range", field, lo, hi, incl_lo, incl_hi]
//! ["regex", field, pattern] ["exists", field] ["fuzzy", field, text, distance, transpositions, prefix]
//! ["parse", text, [default field, ...]]
//! ```
//!
//! `occur` is "must", "should" or "must_not"; a value is a JSON string, number or boolean,
//! `{"date_us": microseconds}`, `{"bytes_hex": "00ff..."}` or `{"f64": "NaN" | "inf" | "-inf"}`;
//! `field` may be `json_field.path`.
//! `parse` hands its text to Tantivy's query parser over the default fields (regexes allowed), as
//! `Index.parse_query` of the `tantivy` package does.

use std::net::IpAddr;
use std::ops::Bound;

use serde_json::Value;
use tantivy::query::{
    AllQuery, BooleanQuery, BoostQuery, ConstScoreQuery, EmptyQuery, ExistsQuery, FuzzyTermQuery, Occur, PhraseQuery,
    Query, QueryParser, RangeQuery, RegexQuery, TermQuery, TermSetQuery,
};
use tantivy::schema::{Field, FieldType, IndexRecordOption, Schema};
use tantivy::{DateTime, Index, Term};

pub type PlanResult<T> = Result<T, String>;

/// Tantivy's query parser over the default fields `names`, regexes allowed: what a plan's `parse`
/// node runs, and `Split.check_query`. The error is the name of a field the schema lacks.
pub(crate) fn query_parser(index: &Index, names: &[&str]) -> Result<QueryParser, String> {
    let schema = index.schema();
    let fields = names
        .iter()
        .map(|name| schema.get_field(name).map_err(|_| name.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut parser = QueryParser::for_index(index, fields);
    parser.allow_regexes();
    Ok(parser)
}

fn bad(node: &Value, what: &str) -> String {
    let mut shown = node.to_string();
    if shown.len() > 200 {
        shown.truncate(200);
        shown.push_str("...");
    }
    format!("query plan node {shown}: {what}")
}

fn item<'a>(node: &'a Value, i: usize) -> PlanResult<&'a Value> {
    node.get(i).ok_or_else(|| bad(node, &format!("lacks item {i}")))
}

fn text<'a>(node: &'a Value, i: usize) -> PlanResult<&'a str> {
    item(node, i)?.as_str().ok_or_else(|| bad(node, &format!("item {i} is not a string")))
}

fn float(node: &Value, i: usize) -> PlanResult<f32> {
    item(node, i)?.as_f64().map(|f| f as f32).ok_or_else(|| bad(node, &format!("item {i} is not a number")))
}

fn flag(node: &Value, i: usize) -> PlanResult<bool> {
    item(node, i)?.as_bool().ok_or_else(|| bad(node, &format!("item {i} is not a boolean")))
}

/// A float of the plan: a JSON number, or `{"f64": "NaN" | "inf" | "-inf"}` (JSON has neither).
fn float_value(value: &Value) -> Option<f64> {
    if let Some(f) = value.as_f64() {
        return Some(f);
    }
    match value.get("f64")?.as_str()? {
        "NaN" => Some(f64::NAN),
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

fn unhex(hex: &str) -> Option<Vec<u8>> {
    if hex.len() % 2 != 0 {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect()
}

/// Compiles plans for one index (its schema and analyzers).
pub struct Compiler<'a> {
    pub index: &'a Index,
    pub schema: Schema,
}

impl<'a> Compiler<'a> {
    pub fn new(index: &'a Index) -> Self {
        Compiler { index, schema: index.schema() }
    }

    pub fn compile(&self, node: &Value) -> PlanResult<Box<dyn Query>> {
        let kind = text(node, 0)?;
        Ok(match kind {
            "all" => Box::new(AllQuery),
            "empty" => Box::new(EmptyQuery),
            "bool" => {
                let parts = item(node, 1)?.as_array().ok_or_else(|| bad(node, "item 1 is not a list"))?;
                let mut clauses = Vec::with_capacity(parts.len());
                for part in parts {
                    let occur = match text(part, 0)? {
                        "must" => Occur::Must,
                        "should" => Occur::Should,
                        "must_not" => Occur::MustNot,
                        other => return Err(bad(part, &format!("unknown occur {other:?}"))),
                    };
                    clauses.push((occur, self.compile(item(part, 1)?)?));
                }
                Box::new(BooleanQuery::new(clauses))
            }
            "boost" => Box::new(BoostQuery::new(self.compile(item(node, 1)?)?, float(node, 2)?)),
            "const" => Box::new(ConstScoreQuery::new(self.compile(item(node, 1)?)?, float(node, 2)?)),
            "term" => {
                let term = self.term(node, text(node, 1)?, item(node, 2)?)?;
                Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs))
            }
            "terms" => {
                let field = text(node, 1)?;
                let values = item(node, 2)?.as_array().ok_or_else(|| bad(node, "item 2 is not a list"))?;
                let terms = values.iter().map(|v| self.term(node, field, v)).collect::<PlanResult<Vec<_>>>()?;
                Box::new(TermSetQuery::new(terms))
            }
            "phrase" => {
                let field = text(node, 1)?;
                let words = item(node, 2)?.as_array().ok_or_else(|| bad(node, "item 2 is not a list"))?;
                let terms = words.iter().map(|v| self.term(node, field, v)).collect::<PlanResult<Vec<_>>>()?;
                if terms.len() < 2 {
                    return Err(bad(node, "a phrase needs two words or more"));
                }
                let slop = item(node, 3)?.as_u64().ok_or_else(|| bad(node, "item 3 is not a slop"))? as u32;
                let mut phrase = PhraseQuery::new(terms);
                phrase.set_slop(slop);
                Box::new(phrase)
            }
            "range" => {
                let field = text(node, 1)?;
                let bound = |i: usize, inclusive: bool| -> PlanResult<Bound<Term>> {
                    let v = item(node, i)?;
                    if v.is_null() {
                        return Ok(Bound::Unbounded);
                    }
                    let t = self.term(node, field, v)?;
                    Ok(if inclusive { Bound::Included(t) } else { Bound::Excluded(t) })
                };
                Box::new(RangeQuery::new(bound(2, flag(node, 4)?)?, bound(3, flag(node, 5)?)?))
            }
            "regex" => {
                let (field, _) = self.field(node, text(node, 1)?)?;
                Box::new(RegexQuery::from_pattern(text(node, 2)?, field).map_err(|e| bad(node, &e.to_string()))?)
            }
            "exists" => Box::new(ExistsQuery::new(text(node, 1)?.to_string(), false)),
            "fuzzy" => {
                let term = self.term(node, text(node, 1)?, item(node, 2)?)?;
                let distance = item(node, 3)?.as_u64().ok_or_else(|| bad(node, "item 3 is not a distance"))? as u8;
                let (transpositions, prefix) = (flag(node, 4)?, flag(node, 5)?);
                Box::new(if prefix {
                    FuzzyTermQuery::new_prefix(term, distance, transpositions)
                } else {
                    FuzzyTermQuery::new(term, distance, transpositions)
                })
            }
            "parse" => {
                let names = item(node, 2)?.as_array().ok_or_else(|| bad(node, "item 2 is not a list"))?;
                let names = names
                    .iter()
                    .map(|name| name.as_str().ok_or_else(|| bad(node, "a default field is not a string")))
                    .collect::<PlanResult<Vec<&str>>>()?;
                let parser = query_parser(self.index, &names).map_err(|name| bad(node, &format!("no field {name:?}")))?;
                parser.parse_query(text(node, 1)?).map_err(|e| bad(node, &e.to_string()))?
            }
            other => return Err(bad(node, &format!("unknown node {other:?}"))),
        })
    }

    fn field<'p>(&self, node: &Value, name: &'p str) -> PlanResult<(Field, &'p str)> {
        if let Ok(field) = self.schema.get_field(name) {
            return Ok((field, ""));
        }
        self.schema.find_field(name).ok_or_else(|| bad(node, &format!("no field {name:?} in the split")))
    }

    /// The term of `value` on `name`, typed as the field is.
    fn term(&self, node: &Value, name: &str, value: &Value) -> PlanResult<Term> {
        let (field, path) = self.field(node, name)?;
        let entry = self.schema.get_field_entry(field);
        let wrong = |t: &str| bad(node, &format!("value {value} is not {t} (field {name:?})"));
        Ok(match entry.field_type() {
            FieldType::Str(_) => Term::from_field_text(field, value.as_str().ok_or_else(|| wrong("a string"))?),
            FieldType::JsonObject(options) => {
                let mut term = Term::from_field_json_path(field, path, options.is_expand_dots_enabled());
                match value {
                    Value::String(s) => term.append_type_and_str(s),
                    Value::Bool(b) => term.append_type_and_fast_value(*b),
                    Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                        (Some(i), _, _) => term.append_type_and_fast_value(i),
                        (None, Some(u), _) => term.append_type_and_fast_value(u),
                        (None, None, Some(f)) => term.append_type_and_fast_value(f),
                        _ => return Err(wrong("a number")),
                    },
                    _ => return Err(wrong("a string, number or boolean")),
                }
                term
            }
            FieldType::Bytes(_) => {
                let hex = value.get("bytes_hex").and_then(Value::as_str).ok_or_else(|| wrong("bytes"))?;
                Term::from_field_bytes(field, &unhex(hex).ok_or_else(|| wrong("bytes"))?)
            }
            FieldType::IpAddr(_) => {
                let text = value.as_str().ok_or_else(|| wrong("an IP address"))?;
                let ip: IpAddr = text.parse().map_err(|_| wrong("an IP address"))?;
                let ip = match ip {
                    IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                    IpAddr::V6(v6) => v6,
                };
                Term::from_field_ip_addr(field, ip)
            }
            FieldType::I64(_) => Term::from_field_i64(field, value.as_i64().ok_or_else(|| wrong("a 64-bit integer"))?),
            FieldType::U64(_) => Term::from_field_u64(field, value.as_u64().ok_or_else(|| wrong("an unsigned integer"))?),
            FieldType::F64(_) => Term::from_field_f64(field, float_value(value).ok_or_else(|| wrong("a number"))?),
            FieldType::Bool(_) => Term::from_field_bool(field, value.as_bool().ok_or_else(|| wrong("a boolean"))?),
            FieldType::Date(_) => {
                let micros = value.get("date_us").and_then(Value::as_i64).ok_or_else(|| wrong("a date"))?;
                Term::from_field_date_for_search(field, DateTime::from_timestamp_micros(micros))
            }
            _ => return Err(bad(node, &format!("field {name:?}: terms of its type are not supported"))),
        })
    }
}
