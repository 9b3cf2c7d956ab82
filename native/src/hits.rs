//! A query's hits as arrays: which documents match (`Matches`: every match, or the first `limit`
//! in document order, with no score computed), and the values of a fast field for given documents
//! (`fast_values`), and the best `k` by score across a split's segments (`best_k`). What `SplitSearcher.row_ids` / `row_hits` / `fast_values` read, with no Python
//! object per hit.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::query::Weight;
use tantivy::{DocAddress, DocId, Score, Searcher, SegmentOrdinal, SegmentReader};

/// Collects the matching documents of each segment in document order, at most `limit` of the
/// whole split (the first ones: lowest segment ordinal, then lowest document id).
pub struct Matches {
    pub limit: usize,
}

pub struct SegmentMatches {
    ord: SegmentOrdinal,
    docs: Vec<DocId>,
    limit: usize,
}

impl SegmentCollector for SegmentMatches {
    type Fruit = (SegmentOrdinal, Vec<DocId>);

    fn collect(&mut self, doc: DocId, _score: Score) {
        if self.docs.len() < self.limit {
            self.docs.push(doc);
        }
    }

    fn collect_block(&mut self, docs: &[DocId]) {
        let room = self.limit - self.docs.len();
        self.docs.extend_from_slice(&docs[..docs.len().min(room)]);
    }

    fn harvest(self) -> Self::Fruit {
        (self.ord, self.docs)
    }
}

impl Collector for Matches {
    type Fruit = (Vec<u32>, Vec<u32>);
    type Child = SegmentMatches;

    fn for_segment(&self, ord: SegmentOrdinal, segment: &SegmentReader) -> tantivy::Result<SegmentMatches> {
        let limit = self.limit.min(segment.num_docs() as usize);
        Ok(SegmentMatches { ord, docs: Vec::with_capacity(limit.min(1 << 16)), limit })
    }

    fn requires_scoring(&self) -> bool {
        false
    }

    fn merge_fruits(&self, mut fruits: Vec<(SegmentOrdinal, Vec<DocId>)>) -> tantivy::Result<Self::Fruit> {
        fruits.sort_unstable_by_key(|(ord, _)| *ord); // segments may be visited in any order
        let total: usize = fruits.iter().map(|(_, docs)| docs.len()).sum::<usize>().min(self.limit);
        let (mut ords, mut docs) = (Vec::with_capacity(total), Vec::with_capacity(total));
        for (ord, segment_docs) in fruits {
            let take = (total - docs.len()).min(segment_docs.len());
            ords.resize(ords.len() + take, ord);
            docs.extend_from_slice(&segment_docs[..take]);
        }
        Ok((ords, docs))
    }
}

/// A fast field's values in the order of the documents given: little-endian bytes of the values
/// (a missing value as 0) and, when any is missing, one byte per document (1: present).
pub struct FastValues {
    pub values: Vec<u8>,
    pub present: Option<Vec<u8>>,
}

/// The fast field `name` of the documents (`ords[i]`, `docs[i]`) read as `kind` ("i64", "u64",
/// "f64" or "bool"; a bool as one byte).
pub fn fast_values(searcher: &Searcher, name: &str, kind: &str, ords: &[u32], docs: &[u32]) -> tantivy::Result<FastValues> {
    let readers = searcher.segment_readers();
    let segment = |ord: u32| -> tantivy::Result<&SegmentReader> {
        readers.get(ord as usize).ok_or_else(|| tantivy::TantivyError::InvalidArgument(format!("no segment {ord}")))
    };
    let mut present = vec![1u8; docs.len()];
    let mut missing = false;
    let mut values = Vec::with_capacity(docs.len() * if kind == "bool" { 1 } else { 8 });
    macro_rules! read {
        ($column:ident, $to_bytes:expr) => {{
            let mut columns = Vec::with_capacity(readers.len());
            for reader in readers {
                columns.push(reader.fast_fields().$column(name)?);
            }
            for (i, (&ord, &doc)) in ords.iter().zip(docs).enumerate() {
                segment(ord)?;
                let value = columns[ord as usize].first(doc);
                if value.is_none() {
                    present[i] = 0;
                    missing = true;
                }
                values.extend_from_slice(&$to_bytes(value.unwrap_or_default()));
            }
        }};
    }
    match kind {
        "i64" => read!(i64, i64::to_le_bytes),
        "u64" => read!(u64, u64::to_le_bytes),
        "f64" => read!(f64, f64::to_le_bytes),
        "bool" => read!(bool, |b: bool| [b as u8]),
        other => return Err(tantivy::TantivyError::InvalidArgument(format!("fast values of kind {other:?}"))),
    }
    Ok(FastValues { values, present: missing.then_some(present) })
}

/// A heap entry of `best_k`: greater is better — a higher score, then the lower address (the order
/// Tantivy's own top-k keeps).
struct Ranked {
    score: Score,
    address: DocAddress,
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.partial_cmp(&other.score).unwrap_or(Ordering::Equal).then_with(|| other.address.cmp(&self.address))
    }
}

/// The `k` best documents of `weight` scoring above `floor`, best first: Tantivy's Block-WAND top-k
/// (`Weight::for_each_pruning`), with one heap over all the split's segments, so a segment searched
/// after another starts from the threshold that one reached (Tantivy's `TopDocs` starts each segment
/// from nothing), and the first from `floor` (the table's k-th best so far). Deleted documents are
/// skipped.
pub fn best_k(searcher: &Searcher, weight: &dyn Weight, k: usize, floor: Score) -> tantivy::Result<Vec<(Score, DocAddress)>> {
    let mut heap: BinaryHeap<Reverse<Ranked>> = BinaryHeap::with_capacity(k + 1);
    let mut threshold = floor;
    for (ord, reader) in searcher.segment_readers().iter().enumerate() {
        let alive = reader.alive_bitset();
        weight.for_each_pruning(threshold, reader, &mut |doc, score| {
            if alive.is_some_and(|a| a.is_deleted(doc)) {
                return threshold;
            }
            heap.push(Reverse(Ranked { score, address: DocAddress::new(ord as SegmentOrdinal, doc) }));
            if heap.len() > k {
                heap.pop();
            }
            if heap.len() == k {
                threshold = threshold.max(heap.peek().map_or(floor, |r| r.0.score));
            }
            threshold
        })?;
    }
    let mut best: Vec<(Score, DocAddress)> = heap.into_iter().map(|Reverse(r)| (r.score, r.address)).collect();
    best.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal).then_with(|| a.1.cmp(&b.1)));
    Ok(best)
}
