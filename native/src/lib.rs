//! `indextables_native`: the project's engine core over Tantivy (issue 69).
//!
//! A split is opened in place (`bundle::BundleDirectory`: the `.split` file memory-mapped, its
//! SSTable term dictionaries read as they are), queries arrive as plans (`plan`), and ranked
//! search is Tantivy's own top-k with table-wide BM25 statistics handed in (`Split.top_k`), so no
//! hit comes back to Python to be rescored. The GIL is released while a split is searched.
//! Splits are written from Arrow record batches (`writer::IndexWriter`, issue 72).

mod bundle;
mod hits;
mod plan;
mod store;
mod writer;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString};
use serde_json::Value;
use tantivy::aggregation::agg_req::Aggregations;
use tantivy::aggregation::{AggContextParams, AggregationCollector, AggregationLimitsGuard};
use tantivy::collector::{Count, TopDocs};
use tantivy::query::{Bm25StatisticsProvider, EnableScoring, Query};
use tantivy::schema::{Field, FieldType, Type};
use tantivy::snippet::{Snippet, SnippetGenerator};
use tantivy::tokenizer::{
    Language, LowerCaser, RawTokenizer, RemoveLongFilter, SimpleTokenizer, Stemmer, TextAnalyzer, Token, TokenFilter,
    TokenStream, Tokenizer, WhitespaceTokenizer,
};
use tantivy::{DocAddress, Index, IndexReader, Order, ReloadPolicy, Score, Searcher, Term};

use crate::bundle::BundleDirectory;
use crate::hits::Matches;
use crate::plan::{query_parser, Compiler};

const DEFAULT_MAX_TOKEN_LENGTH: usize = 255;

/// The Snowball language of a stemmer's tokenizer name (`indextables_contract.settings.STEMMERS`):
/// `en_stem`, `de_stem`, `fr_stem` ... every language of `tantivy::tokenizer::Language`.
fn stemmer_language(name: &str) -> Option<Language> {
    Some(match name {
        "ar_stem" => Language::Arabic,
        "da_stem" => Language::Danish,
        "nl_stem" => Language::Dutch,
        "en_stem" => Language::English,
        "fi_stem" => Language::Finnish,
        "fr_stem" => Language::French,
        "de_stem" => Language::German,
        "el_stem" => Language::Greek,
        "hu_stem" => Language::Hungarian,
        "it_stem" => Language::Italian,
        "no_stem" => Language::Norwegian,
        "pt_stem" => Language::Portuguese,
        "ro_stem" => Language::Romanian,
        "ru_stem" => Language::Russian,
        "es_stem" => Language::Spanish,
        "sv_stem" => Language::Swedish,
        "ta_stem" => Language::Tamil,
        "tr_stem" => Language::Turkish,
        _ => return None,
    })
}

/// The longest gram an n-gram tokenizer may name (`indextables_contract.settings.NGRAM_MAX`).
const NGRAM_MAX: usize = 32;

/// `ngram_<min>_<max>` -> (false, min, max), `edge_ngram_<min>_<max>` -> (true, min, max), with
/// 1 <= min <= max <= 32 (`indextables_contract.settings.ngram_spec`); None for another name.
fn ngram_spec(name: &str) -> Option<(bool, usize, usize)> {
    let (prefix_only, rest) = match name.strip_prefix("edge_ngram_") {
        Some(rest) => (true, rest),
        None => (false, name.strip_prefix("ngram_")?),
    };
    let (lo, hi) = rest.split_once('_')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(lo) || !digits(hi) {
        return None;
    }
    let (min, max): (usize, usize) = (lo.parse().ok()?, hi.parse().ok()?);
    (1 <= min && min <= max && max <= NGRAM_MAX).then_some((prefix_only, min, max))
}

/// A token filter making each token its n-grams of `min..=max` characters (`prefix_only`: its
/// prefixes only, the edge n-grams), each at the token's position and with its offsets, shortest
/// first from each start; a token shorter than `min` characters gives none. Tantivy's
/// `NgramTokenizer` grams the whole text; this grams each word of the tokenizer before it.
#[derive(Clone)]
struct NgramFilter {
    min: usize,
    max: usize,
    prefix_only: bool,
}

impl TokenFilter for NgramFilter {
    type Tokenizer<T: Tokenizer> = NgramFilterTokenizer<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> NgramFilterTokenizer<T> {
        NgramFilterTokenizer { spec: self, inner: tokenizer }
    }
}

#[derive(Clone)]
struct NgramFilterTokenizer<T> {
    spec: NgramFilter,
    inner: T,
}

impl<T: Tokenizer> Tokenizer for NgramFilterTokenizer<T> {
    type TokenStream<'a> = NgramTokenStream<T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        NgramTokenStream {
            spec: self.spec.clone(),
            tail: self.inner.token_stream(text),
            word: String::new(),
            grams: Vec::new(),
            next: 0,
            token: Token::default(),
        }
    }
}

struct NgramTokenStream<S> {
    spec: NgramFilter,
    tail: S,
    word: String,               // the current word
    grams: Vec<(usize, usize)>, // its grams' byte ranges
    next: usize,                // the next of them
    token: Token,
}

impl<S: TokenStream> NgramTokenStream<S> {
    fn gram_word(&mut self) {
        let word = self.tail.token();
        self.word.clear();
        self.word.push_str(&word.text);
        self.token = word.clone();
        let mut bounds: Vec<usize> = self.word.char_indices().map(|(i, _)| i).collect();
        bounds.push(self.word.len());
        let chars = bounds.len() - 1;
        self.grams.clear();
        self.next = 0;
        let starts = if self.spec.prefix_only { chars.min(1) } else { chars };
        for start in 0..starts {
            for len in self.spec.min..=self.spec.max.min(chars - start) {
                self.grams.push((bounds[start], bounds[start + len]));
            }
        }
    }
}

impl<S: TokenStream> TokenStream for NgramTokenStream<S> {
    fn advance(&mut self) -> bool {
        while self.next >= self.grams.len() {
            if !self.tail.advance() {
                return false;
            }
            self.gram_word();
        }
        let (from, to) = self.grams[self.next];
        self.next += 1;
        self.token.text.clear();
        self.token.text.push_str(&self.word[from..to]);
        true
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

/// The analyzer a schema names, as `executor_lib/splits/tokenizers.py` builds it: `default`,
/// `whitespace` (tokens of 255 bytes or more dropped), `raw`, a stemmer (`en_stem`, `de_stem` ...:
/// `default` then the language's stemmer), an n-gram tokenizer (`ngram_<min>_<max>`,
/// `edge_ngram_<min>_<max>`: `default`, then each word's n-grams or prefixes, `NgramFilter`), and `<name>_max<N>` / tantivy4java's `<name>_limit_<N>`
/// with another limit.
fn analyzer(name: &str) -> Option<TextAnalyzer> {
    let (base, limit) = match name.rsplit_once("_max").or_else(|| name.rsplit_once("_limit_")) {
        Some((base, n)) => (base, n.parse().ok()?),
        None => (name, DEFAULT_MAX_TOKEN_LENGTH),
    };
    Some(match base {
        "raw" => TextAnalyzer::builder(RawTokenizer::default()).build(),
        "whitespace" => TextAnalyzer::builder(WhitespaceTokenizer::default()).filter(RemoveLongFilter::limit(limit)).build(),
        "default" => TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(limit))
            .filter(LowerCaser)
            .build(),
        grams if ngram_spec(grams).is_some() => {
            let (prefix_only, min, max) = ngram_spec(grams)?;
            TextAnalyzer::builder(SimpleTokenizer::default())
                .filter(RemoveLongFilter::limit(limit))
                .filter(LowerCaser)
                .filter(NgramFilter { min, max, prefix_only })
                .build()
        }
        stem => TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(limit))
            .filter(LowerCaser)
            .filter(Stemmer::new(stemmer_language(stem)?))
            .build(),
    })
}

pub(crate) fn register_analyzers(index: &Index) {
    let schema = index.schema();
    let mut names = BTreeSet::new();
    for (_, entry) in schema.fields() {
        let indexing = match entry.field_type() {
            FieldType::Str(options) => options.get_indexing_options(),
            FieldType::JsonObject(options) => options.get_text_indexing_options(),
            _ => None,
        };
        if let Some(indexing) = indexing {
            names.insert(indexing.tokenizer().to_string());
        }
    }
    for name in ["default", "en_stem", "whitespace", "raw"] {
        names.insert(name.to_string());
    }
    for name in names {
        if let Some(a) = analyzer(&name) {
            index.tokenizers().register(&name, a.clone());
            index.fast_field_tokenizer().register(&name, a); // a fast text field's normaliser
        }
    }
}

/// A term as the Python side keys its document frequency (`scoring.ScoreStats`): its text, or
/// its number, or (any other type, a JSON path) "\x00" and the hex of its serialized value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Text(String),
    Int(i128),
    Float(u64),
    Raw(String),
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Key {
    fn of(term: &Term) -> Key {
        let value = term.value();
        match value.typ() {
            Type::Str => Key::Text(value.as_str().unwrap_or_default().to_string()),
            Type::I64 => Key::Int(value.as_i64().map(i128::from).unwrap_or_default()),
            Type::U64 => Key::Int(value.as_u64().map(i128::from).unwrap_or_default()),
            Type::F64 => Key::Float(value.as_f64().unwrap_or_default().to_bits()),
            _ => Key::Raw(hex(term.serialized_value_bytes())),
        }
    }

    fn from_py(value: &Bound<'_, PyAny>) -> PyResult<Key> {
        if let Ok(s) = value.cast::<PyString>() {
            let s = s.to_str()?;
            return Ok(match s.strip_prefix('\x00') {
                Some(raw) => Key::Raw(raw.to_string()),
                None => Key::Text(s.to_string()),
            });
        }
        if value.is_instance_of::<PyBool>() {
            return Err(PyValueError::new_err("a boolean term key"));
        }
        if value.is_instance_of::<PyInt>() {
            return Ok(Key::Int(value.extract()?));
        }
        if value.is_instance_of::<PyFloat>() {
            return Ok(Key::Float(value.extract::<f64>()?.to_bits()));
        }
        Err(PyValueError::new_err(format!("term key {value} is not a string or number")))
    }

    fn into_py<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            Key::Text(s) => PyString::new(py, &s).into_any(),
            Key::Int(i) => i.into_pyobject(py)?.into_any(),
            Key::Float(bits) => PyFloat::new(py, f64::from_bits(bits)).into_any(),
            Key::Raw(h) => PyString::new(py, &format!("\x00{h}")).into_any(),
        })
    }
}

/// Table-wide BM25 statistics: documents, tokens per field, document frequency per term, keyed by
/// field name and the term's serialized value (fields are found by name: splits of one table may
/// number them differently).
struct TableStats<'a> {
    num_docs: u64,
    field_tokens: HashMap<String, u64>,
    doc_freqs: HashMap<(String, Key), u64>,
    searcher: &'a Searcher,
}

impl TableStats<'_> {
    fn name(&self, field: Field) -> &str {
        self.searcher.schema().get_field_name(field)
    }
}

impl Bm25StatisticsProvider for TableStats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        match self.field_tokens.get(self.name(field)) {
            Some(&n) => Ok(n),
            None => Bm25StatisticsProvider::total_num_tokens(self.searcher, field),
        }
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.num_docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let key = (self.name(term.field()).to_string(), Key::of(term));
        match self.doc_freqs.get(&key) {
            Some(&n) => Ok(n),
            None => self.searcher.doc_freq(term),
        }
    }
}

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// One split, opened in place.
#[pyclass(frozen, module = "indextables_native")]
struct Split {
    index: Index,
    reader: IndexReader,
}

impl Split {
    fn over(directory: BundleDirectory, name: &str) -> PyResult<Split> {
        let index = Index::open(directory).map_err(|e| value_error(format!("{name}: the split's index does not open ({e})")))?;
        register_analyzers(&index);
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| value_error(format!("{name}: the split's index does not open ({e})")))?;
        Ok(Split { index, reader })
    }

    fn query(&self, plan: &str) -> PyResult<Box<dyn Query>> {
        let node: Value = serde_json::from_str(plan).map_err(|e| value_error(format!("query plan: {e}")))?;
        Compiler::new(&self.index).compile(&node).map_err(PyValueError::new_err)
    }

    fn terms_of(&self, query: &dyn Query) -> Vec<Term> {
        let mut terms = BTreeSet::new();
        query.query_terms(&mut |term, _| {
            terms.insert(term.clone());
        });
        terms.into_iter().collect()
    }
}

#[pymethods]
impl Split {
    /// Opens the split file at `path` in place (memory-mapped; nothing copied).
    #[staticmethod]
    fn open(py: Python<'_>, path: &str) -> PyResult<Split> {
        py.detach(|| {
            let directory = BundleDirectory::open(Path::new(path)).map_err(|e| PyOSError::new_err(e.to_string()))?;
            Self::over(directory, path)
        })
    }

    /// Opens a split laid out as files: `members` lists (member name, local file) of its Tantivy
    /// index (`meta.json`, each segment's files); each file is memory-mapped.
    #[staticmethod]
    fn open_files(py: Python<'_>, name: &str, members: Vec<(String, String)>) -> PyResult<Split> {
        let members: Vec<(String, std::path::PathBuf)> = members.into_iter().map(|(m, p)| (m, p.into())).collect();
        py.detach(|| {
            let directory = BundleDirectory::of_files(name, &members).map_err(|e| PyOSError::new_err(e.to_string()))?;
            Self::over(directory, name)
        })
    }

    #[getter]
    fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Parses `text` with Tantivy's query parser over the default `fields`, regexes allowed, as a
    /// plan's `parse` node will: a ValueError with the parser's message (the `tantivy` package's
    /// `Index.parse_query` gives the same) when it does not parse.
    fn check_query(&self, text: &str, fields: Vec<String>) -> PyResult<()> {
        let names: Vec<&str> = fields.iter().map(String::as_str).collect();
        let parser = query_parser(&self.index, &names)
            .map_err(|name| value_error(format!("Field `{name}` is not defined in the schema.")))?;
        parser.parse_query(text).map(|_| ()).map_err(value_error)
    }

    /// This split's BM25 statistics for `plan`: (documents, {field: tokens}, {(field, term key):
    /// document frequency}) (`Key`), summed over a table's splits by the caller.
    fn stats<'py>(&self, py: Python<'py>, plan: &str) -> PyResult<(u64, Bound<'py, PyDict>, Bound<'py, PyDict>)> {
        let query = self.query(plan)?;
        let searcher = self.reader.searcher();
        let terms = self.terms_of(query.as_ref());
        let (num_docs, tokens, freqs) = py.detach(|| -> tantivy::Result<_> {
            let num_docs = Bm25StatisticsProvider::total_num_docs(&searcher)?;
            let fields: BTreeSet<Field> = terms.iter().map(Term::field).collect();
            let mut tokens = Vec::with_capacity(fields.len());
            for field in fields {
                tokens.push((field, Bm25StatisticsProvider::total_num_tokens(&searcher, field)?));
            }
            let mut freqs = Vec::with_capacity(terms.len());
            for term in &terms {
                freqs.push(searcher.doc_freq(term)?);
            }
            Ok((num_docs, tokens, freqs))
        }).map_err(value_error)?;
        let schema = searcher.schema();
        let field_tokens = PyDict::new(py);
        for (field, n) in tokens {
            field_tokens.set_item(schema.get_field_name(field), n)?;
        }
        let doc_freqs = PyDict::new(py);
        for (term, n) in terms.iter().zip(freqs) {
            let key = (schema.get_field_name(term.field()), Key::of(term).into_py(py)?);
            doc_freqs.set_item(key, n)?;
        }
        Ok((num_docs, field_tokens, doc_freqs))
    }

    /// The best `k` documents for `plan`, scored with the table's statistics when `stats` is given
    /// as (documents, {field: tokens}, {(field, term key): document frequency}), else the
    /// split's own. Returns (segment ordinals as u32 bytes, doc ids as u32 bytes, scores as f32
    /// bytes, the u64 fast field `row_field` of each hit as u64 bytes, or None), best first.
    /// `floor`: only documents scoring above it are wanted (the k-th best score of the table's splits
    /// searched before, so that Block-WAND skips from the first block what could not make the table's
    /// top k; a document scoring exactly `floor` loses the tie to the earlier split's).
    #[pyo3(signature = (plan, k, stats=None, row_field=None, floor=None))]
    fn top_k<'py>(
        &self,
        py: Python<'py>,
        plan: &str,
        k: usize,
        stats: Option<(u64, HashMap<String, u64>, Bound<'py, PyDict>)>,
        row_field: Option<&str>,
        floor: Option<Score>,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Option<Bound<'py, PyBytes>>)> {
        let query = self.query(plan)?;
        let searcher = self.reader.searcher();
        let k = k.max(1);
        let stats = match stats {
            None => None,
            Some((num_docs, field_tokens, freqs)) => {
                let mut doc_freqs = HashMap::with_capacity(freqs.len());
                for (key, n) in freqs.iter() {
                    let (field, value): (String, Bound<'py, PyAny>) = key.extract()?;
                    doc_freqs.insert((field, Key::from_py(&value)?), n.extract::<u64>()?);
                }
                Some((num_docs, field_tokens, doc_freqs))
            }
        };
        let found = py.detach(|| -> tantivy::Result<(Vec<(Score, DocAddress)>, Option<Vec<u64>>)> {
            let floor = floor.unwrap_or(Score::MIN);
            let hits = match stats {
                Some((num_docs, field_tokens, doc_freqs)) => {
                    let provider = TableStats { num_docs, field_tokens, doc_freqs, searcher: &searcher };
                    let scoring = EnableScoring::enabled_from_statistics_provider(&provider, &searcher);
                    hits::best_k(&searcher, query.weight(scoring)?.as_ref(), k, floor)?
                }
                None => hits::best_k(&searcher, query.weight(EnableScoring::enabled_from_searcher(&searcher))?.as_ref(), k, floor)?,
            };
            let rows = match row_field {
                None => None,
                Some(name) => {
                    let mut columns = Vec::with_capacity(searcher.segment_readers().len());
                    for reader in searcher.segment_readers() {
                        columns.push(reader.fast_fields().u64(name)?);
                    }
                    Some(hits.iter().map(|(_, a)| columns[a.segment_ord as usize].first(a.doc_id).unwrap_or(u64::MAX)).collect())
                }
            };
            Ok((hits, rows))
        }).map_err(value_error)?;
        let (hits, rows) = found;
        let mut ords = Vec::with_capacity(hits.len() * 4);
        let mut docs = Vec::with_capacity(hits.len() * 4);
        let mut scores = Vec::with_capacity(hits.len() * 4);
        for (score, address) in &hits {
            ords.extend_from_slice(&address.segment_ord.to_le_bytes());
            docs.extend_from_slice(&address.doc_id.to_le_bytes());
            scores.extend_from_slice(&score.to_le_bytes());
        }
        let rows = rows.map(|r| {
            let bytes: Vec<u8> = r.iter().flat_map(|v| v.to_le_bytes()).collect();
            PyBytes::new(py, &bytes)
        });
        Ok((PyBytes::new(py, &ords), PyBytes::new(py, &docs), PyBytes::new(py, &scores), rows))
    }

    /// How many documents match `plan`.
    fn count(&self, py: Python<'_>, plan: &str) -> PyResult<usize> {
        let query = self.query(plan)?;
        let searcher = self.reader.searcher();
        py.detach(|| searcher.search(query.as_ref(), &Count)).map_err(value_error)
    }

    /// The documents matching `plan` in document order (segment ordinal, then doc id), at most
    /// `limit` (the first ones): (segment ordinals as u32 bytes, doc ids as u32 bytes). No score
    /// is computed.
    #[pyo3(signature = (plan, limit=None))]
    fn matches<'py>(&self, py: Python<'py>, plan: &str, limit: Option<usize>) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let query = self.query(plan)?;
        let searcher = self.reader.searcher();
        let collector = Matches { limit: limit.unwrap_or(usize::MAX) };
        let (ords, docs) = py.detach(|| searcher.search(query.as_ref(), &collector)).map_err(value_error)?;
        Ok((PyBytes::new(py, &u32_bytes(&ords)), PyBytes::new(py, &u32_bytes(&docs))))
    }

    /// The `limit` documents matching `plan` whose u64 fast field `row_field` is lowest, in that
    /// order: (segment ordinals as u32 bytes, doc ids as u32 bytes, the field's values as u64 bytes;
    /// a document without one sorts last, as u64::MAX).
    fn first_by<'py>(
        &self,
        py: Python<'py>,
        plan: &str,
        limit: usize,
        row_field: &str,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let query = self.query(plan)?;
        let searcher = self.reader.searcher();
        let collector = TopDocs::with_limit(limit.max(1)).order_by_u64_field(row_field, Order::Asc);
        let hits = py.detach(|| searcher.search(query.as_ref(), &collector)).map_err(value_error)?;
        let (mut ords, mut docs, mut rows) = (Vec::new(), Vec::new(), Vec::new());
        for (row, address) in hits.iter().take(limit) {
            ords.extend_from_slice(&address.segment_ord.to_le_bytes());
            docs.extend_from_slice(&address.doc_id.to_le_bytes());
            rows.extend_from_slice(&row.unwrap_or(u64::MAX).to_le_bytes());
        }
        Ok((PyBytes::new(py, &ords), PyBytes::new(py, &docs), PyBytes::new(py, &rows)))
    }

    /// Elasticsearch-style aggregations (`request`: their JSON, as Tantivy's `Aggregations` reads
    /// it) over the documents matching `plan`: the results as JSON (Tantivy's `AggregationResults`).
    fn aggregate(&self, py: Python<'_>, plan: &str, request: &str) -> PyResult<String> {
        let query = self.query(plan)?;
        let aggregations: Aggregations =
            serde_json::from_str(request).map_err(|e| value_error(format!("aggregation request: {e}")))?;
        let context = AggContextParams::new(AggregationLimitsGuard::default(), self.index.tokenizers().clone());
        let collector = AggregationCollector::from_aggs(aggregations, context);
        let searcher = self.reader.searcher();
        let results = py.detach(|| searcher.search(query.as_ref(), &collector)).map_err(value_error)?;
        serde_json::to_string(&results).map_err(value_error)
    }

    /// For each of `texts` (values of the text field `field`), the fragment of at most `max_chars`
    /// around the terms of `plan` on that field, each match between `tags`, as Tantivy's
    /// `SnippetGenerator` picks it (the text as it is, not HTML-escaped; no match: the text's
    /// start, unmarked). None stays None.
    fn snippets(
        &self,
        py: Python<'_>,
        plan: &str,
        field: &str,
        texts: Vec<Option<String>>,
        tags: (String, String),
        max_chars: usize,
    ) -> PyResult<Vec<Option<String>>> {
        let query = self.query(plan)?;
        let field = self.index.schema().get_field(field).map_err(value_error)?;
        let searcher = self.reader.searcher();
        py.detach(|| -> tantivy::Result<Vec<Option<String>>> {
            let mut generator = SnippetGenerator::create(&searcher, query.as_ref(), field)?;
            generator.set_max_num_chars(max_chars);
            Ok(texts.iter().map(|text| text.as_deref().map(|t| marked(&generator.snippet(t), &tags))).collect())
        })
        .map_err(value_error)
    }

    /// The fast field `field` of the documents (`ords`, `docs`: u32 arrays, e.g. from `matches`)
    /// read as `kind` ("i64", "u64", "f64", "bool"): (little-endian values, a bool as one byte; one
    /// byte per document, 1 where it has a value, or None when every one has).
    fn fast_values<'py>(
        &self,
        py: Python<'py>,
        field: &str,
        kind: &str,
        ords: &[u8],
        docs: &[u8],
    ) -> PyResult<(Bound<'py, PyBytes>, Option<Bound<'py, PyBytes>>)> {
        let (ords, docs) = (from_u32_bytes(ords)?, from_u32_bytes(docs)?);
        if ords.len() != docs.len() {
            return Err(PyValueError::new_err("fast_values: as many segment ordinals as doc ids are needed"));
        }
        let searcher = self.reader.searcher();
        let found = py.detach(|| hits::fast_values(&searcher, field, kind, &ords, &docs)).map_err(value_error)?;
        Ok((PyBytes::new(py, &found.values), found.present.map(|p| PyBytes::new(py, &p))))
    }
}

/// A snippet's fragment with each highlighted range between the tags.
fn marked(snippet: &Snippet, (start, end): &(String, String)) -> String {
    let fragment = snippet.fragment();
    let mut out = String::with_capacity(fragment.len() + snippet.highlighted().len() * (start.len() + end.len()));
    let mut pos = 0;
    for range in snippet.highlighted() {
        out.push_str(&fragment[pos..range.start]);
        out.push_str(start);
        out.push_str(&fragment[range.clone()]);
        out.push_str(end);
        pos = range.end;
    }
    out.push_str(&fragment[pos..]);
    out
}

fn u32_bytes(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn from_u32_bytes(bytes: &[u8]) -> PyResult<Vec<u32>> {
    if bytes.len() % 4 != 0 {
        return Err(PyValueError::new_err("an array of u32 is a multiple of 4 bytes"));
    }
    Ok(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

#[pymodule]
fn indextables_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TANTIVY_VERSION", "0.27.0")?;
    m.add_class::<Split>()?;
    m.add_class::<writer::IndexWriter>()?;
    Ok(())
}
