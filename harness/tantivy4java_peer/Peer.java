// The tantivy4java peer: a small program of this project (not of tantivy4java) that drives the real
// tantivy4java engine through its public API, for the jvm tests (tests/jvm/test_tantivy4java.py).
// Compiled at test setup against the jar that scripts/tantivy4java.sh fetched into the cache
// (javac -cp <jars>), never shipped with the project.
//
// Protocol: one JSON job per line on stdin, one JSON result per line on stdout (in order), each
// {"ok": true, ...} or {"ok": false, "error": "<exception class>: <message>"}; the peer goes on after a
// failed job. A first line {"ready": true, "engine": "tantivy4java"} says it started. Jobs:
//   {"op": "search", "split": path or URL, "footer_start": n, "footer_end": n, "doc_mapping": json,
//    "num_docs": n, "query": "tantivy4java query string", "default_fields": [...], "limit": n,
//    "fields": [...] (optional projection), "storage": {...} (optional, S3)}
//     -> {"count": hits, "docs": [{field: [value, ...]}, ...]}
//   {"op": "count", ... as search} -> {"count": hits}
//   {"op": "aggregate", ... as search, "aggregations": [{"name", "kind": "stats"|"terms", "field", "size"}]}
//     -> {"aggregations": {name: {"count", "sum", "min", "max"} or {"buckets": [[key text, doc count], ...]}}}
//   {"op": "write", "index_dir": dir, "split": path, "fields": [{"name", "type", "stored", "indexed",
//    "fast", "tokenizer", "record", "max_token_length"}; type text|string|i64|f64|bool|date|bytes|ip|json], "docs": [tantivy JSON documents: {field: value or [values]}]}
//     -> the split's metadata: footer offsets, num_docs, doc_mapping_json, ...
//   {"op": "merge", "splits": [paths], "split": output path, "temp_dir": dir}
//     -> the merged split's metadata (QuickwitSplit.mergeSplits, as IndexTables4Spark's MERGE SPLITS)
// Values out: numbers, booleans and strings as JSON; bytes {"$bytes": base64} (or the text tantivy4java
// gives); dates {"$date": ISO text}. Values in (write): tantivy's JSON document form, dates as RFC 3339 text
// ("2024-01-01T12:00:00.123456Z"), bytes as base64 text.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.indextables.tantivy4java.aggregation.AggregationResult;
import io.indextables.tantivy4java.aggregation.StatsAggregation;
import io.indextables.tantivy4java.aggregation.StatsResult;
import io.indextables.tantivy4java.aggregation.TermsAggregation;
import io.indextables.tantivy4java.aggregation.TermsResult;
import io.indextables.tantivy4java.core.Document;
import io.indextables.tantivy4java.core.Index;
import io.indextables.tantivy4java.core.IndexWriter;
import io.indextables.tantivy4java.core.Schema;
import io.indextables.tantivy4java.core.SchemaBuilder;
import io.indextables.tantivy4java.result.SearchResult;
import io.indextables.tantivy4java.split.SplitAggregation;
import io.indextables.tantivy4java.split.SplitCacheManager;
import io.indextables.tantivy4java.split.SplitQuery;
import io.indextables.tantivy4java.split.SplitSearcher;
import io.indextables.tantivy4java.split.merge.QuickwitSplit;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.temporal.TemporalAccessor;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

public final class Peer {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Map<String, SplitCacheManager> MANAGERS = new HashMap<>();

    public static void main(String[] args) throws Exception {
        // stdout carries the protocol only: the library's own prints go to stderr
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        ObjectNode ready = JSON.createObjectNode();
        ready.put("ready", true);
        ready.put("engine", "tantivy4java");
        out.println(JSON.writeValueAsString(ready));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode result;
            try {
                JsonNode job = JSON.readTree(line);
                result = run(job);
                result.put("ok", true);
            } catch (Throwable e) {
                result = JSON.createObjectNode();
                result.put("ok", false);
                result.put("error", e.getClass().getName() + ": " + e.getMessage());
            }
            out.println(JSON.writeValueAsString(result));
        }
        for (SplitCacheManager manager : MANAGERS.values()) {
            manager.close();
        }
    }

    private static ObjectNode run(JsonNode job) throws Exception {
        String op = job.path("op").asText();
        switch (op) {
            case "search":
                return search(job, true);
            case "count":
                return search(job, false);
            case "aggregate":
                return aggregate(job);
            case "write":
                return write(job);
            case "merge":
                return merge(job);
            default:
                throw new IllegalArgumentException("unknown op '" + op + "'");
        }
    }

    // --- reading a split

    private static SplitCacheManager manager(JsonNode storage) {
        String key = storage == null || storage.isMissingNode() || storage.isNull() ? "" : storage.toString();
        return MANAGERS.computeIfAbsent(key, k -> {
            SplitCacheManager.CacheConfig config =
                    new SplitCacheManager.CacheConfig("peer-" + Math.abs(k.hashCode())).withMaxCacheSize(200_000_000L);
            if (!k.isEmpty()) {
                if (storage.hasNonNull("access_key_id")) {
                    config = config.withAwsCredentials(
                            storage.get("access_key_id").asText(), storage.get("secret_access_key").asText());
                }
                if (storage.hasNonNull("region")) {
                    config = config.withAwsRegion(storage.get("region").asText());
                }
                if (storage.hasNonNull("endpoint_url")) {
                    config = config.withAwsEndpoint(storage.get("endpoint_url").asText());
                }
                if (storage.path("path_style").asBoolean(false)) {
                    config = config.withAwsPathStyleAccess(true);
                }
            }
            return SplitCacheManager.getInstance(config);
        });
    }

    private static SplitSearcher open(JsonNode job) {
        String split = job.get("split").asText();
        QuickwitSplit.SplitMetadata metadata = new QuickwitSplit.SplitMetadata(
                job.path("split_id").asText(""), "peer-index", 0L, "peer-source", "peer-node",
                job.path("num_docs").asLong(0), 0L, null, null, 0L, "Mature", null,
                job.get("footer_start").asLong(), job.get("footer_end").asLong(), 0L, 0,
                "peer-doc-mapping", job.path("doc_mapping").isNull() ? null : job.path("doc_mapping").asText(null),
                null);
        return manager(job.get("storage")).createSplitSearcher(split, metadata);
    }

    private static SplitQuery query(SplitSearcher searcher, JsonNode job) {
        List<String> defaults = new ArrayList<>();
        for (JsonNode f : job.path("default_fields")) {
            defaults.add(f.asText());
        }
        String text = job.get("query").asText();
        return defaults.isEmpty() ? searcher.parseQuery(text) : searcher.parseQuery(text, defaults);
    }

    private static ObjectNode search(JsonNode job, boolean withDocs) throws Exception {
        try (SplitSearcher searcher = open(job)) {
            SplitQuery query = query(searcher, job);
            int limit = job.path("limit").asInt(Math.max(job.path("num_docs").asInt(0), 10_000));
            ObjectNode result = JSON.createObjectNode();
            try (SearchResult found = searcher.search(query, limit)) {
                List<SearchResult.Hit> hits = found.getHits();
                result.put("count", hits.size());
                if (withDocs) {
                    List<String> names = new ArrayList<>();
                    for (JsonNode f : job.path("fields")) {
                        names.add(f.asText());
                    }
                    if (names.isEmpty()) {
                        try (Schema schema = searcher.getSchema()) {
                            names.addAll(schema.getFieldNames());
                        }
                    }
                    ArrayNode docs = result.putArray("docs");
                    for (SearchResult.Hit hit : hits) {
                        try (Document doc = searcher.doc(hit.getDocAddress())) {
                            ObjectNode fields = docs.addObject();
                            for (String name : names) {
                                ArrayNode values = fields.putArray(name);
                                for (Object v : doc.get(name)) {
                                    values.add(toJson(v));
                                }
                            }
                        }
                    }
                }
            }
            return result;
        }
    }

    private static ObjectNode aggregate(JsonNode job) throws Exception {
        Map<String, SplitAggregation> wanted = new java.util.LinkedHashMap<>();
        for (JsonNode a : job.get("aggregations")) {
            String name = a.get("name").asText();
            String field = a.get("field").asText();
            String kind = a.get("kind").asText();
            if (kind.equals("stats")) {
                wanted.put(name, new StatsAggregation(name, field));
            } else if (kind.equals("terms")) {
                int size = a.path("size").asInt(100);
                wanted.put(name, new TermsAggregation(name, field, size, Math.max(size, 100)));
            } else {
                throw new IllegalArgumentException("unknown aggregation kind '" + kind + "'");
            }
        }
        try (SplitSearcher searcher = open(job)) {
            SplitQuery query = query(searcher, job);
            ObjectNode result = JSON.createObjectNode();
            ObjectNode out = result.putObject("aggregations");
            try (SearchResult found = searcher.aggregate(query, wanted)) {
                for (String name : wanted.keySet()) {
                    AggregationResult r = found.getAggregation(name);
                    ObjectNode one = out.putObject(name);
                    if (r instanceof StatsResult) {
                        StatsResult st = (StatsResult) r;
                        one.put("count", st.getCount());
                        one.put("sum", st.getSum());
                        one.put("min", st.getMin());
                        one.put("max", st.getMax());
                    } else if (r instanceof TermsResult) {
                        ArrayNode buckets = one.putArray("buckets");
                        for (TermsResult.TermsBucket b : ((TermsResult) r).getBuckets()) {
                            buckets.addArray().add(b.getKeyAsString()).add(b.getDocCount());
                        }
                    } else {
                        one.put("other", String.valueOf(r));
                    }
                }
            }
            return result;
        }
    }

    private static JsonNode toJson(Object v) {
        if (v == null) {
            return JSON.nullNode();
        }
        if (v instanceof byte[]) {
            return JSON.createObjectNode().put("$bytes", Base64.getEncoder().encodeToString((byte[]) v));
        }
        if (v instanceof TemporalAccessor || v instanceof java.util.Date) {
            return JSON.createObjectNode().put("$date", v.toString());
        }
        if (v instanceof Number || v instanceof Boolean || v instanceof String || v instanceof Map
                || v instanceof List) {
            return JSON.valueToTree(v);
        }
        return JSON.createObjectNode().put("$other", v.getClass().getName() + ": " + v);
    }

    // --- writing a split

    private static ObjectNode write(JsonNode job) throws Exception {
        Schema schema;
        try (SchemaBuilder builder = new SchemaBuilder()) {
            for (JsonNode f : job.get("fields")) {
                String name = f.get("name").asText();
                String type = f.get("type").asText();
                boolean stored = f.path("stored").asBoolean(true);
                boolean indexed = f.path("indexed").asBoolean(true);
                boolean fast = f.path("fast").asBoolean(false);
                switch (type) {
                    case "text":
                        if (f.hasNonNull("max_token_length")) {
                            builder.addTextField(name, stored, fast, f.path("tokenizer").asText("default"),
                                    f.path("record").asText("position"), f.get("max_token_length").asInt());
                        } else {
                            builder.addTextField(name, stored, fast, f.path("tokenizer").asText("default"),
                                    f.path("record").asText("position"));
                        }
                        break;
                    case "string":
                        builder.addStringField(name, stored, indexed, fast);
                        break;
                    case "i64":
                        builder.addIntegerField(name, stored, indexed, fast);
                        break;
                    case "f64":
                        builder.addFloatField(name, stored, indexed, fast);
                        break;
                    case "bool":
                        builder.addBooleanField(name, stored, indexed, fast);
                        break;
                    case "date":
                        builder.addDateField(name, stored, indexed, fast);
                        break;
                    case "bytes":
                        builder.addBytesField(name, stored, indexed, fast, "basic");
                        break;
                    case "ip":
                        builder.addIpAddrField(name, stored, indexed, fast);
                        break;
                    case "json":
                        builder.addJsonField(name, stored, f.path("tokenizer").asText("default"), "position");
                        break;
                    default:
                        throw new IllegalArgumentException("field " + name + ": unknown type '" + type + "'");
                }
            }
            schema = builder.build();
        }
        String indexDir = job.get("index_dir").asText();
        try (Index index = new Index(schema, indexDir, false)) {
            try (IndexWriter writer = index.writer(50_000_000, 1)) {
                // tantivy's own JSON document form (its 0.31.0 Document.addBytes is not implemented natively):
                // dates as RFC 3339 text, bytes as base64, a null left out
                for (JsonNode d : job.get("docs")) {
                    writer.addJson(JSON.writeValueAsString(d));
                }
                writer.commit();
            }
        }
        QuickwitSplit.SplitConfig config = new QuickwitSplit.SplitConfig(
                job.path("index_uid").asText("peer-index"), "peer-source", "peer-node");
        return metadata(QuickwitSplit.convertIndexFromPath(indexDir, job.get("split").asText(), config));
    }

    private static ObjectNode merge(JsonNode job) throws Exception {
        List<String> inputs = new ArrayList<>();
        for (JsonNode f : job.get("splits")) {
            inputs.add(f.asText());
        }
        QuickwitSplit.MergeConfig config = QuickwitSplit.MergeConfig.builder()
                .indexUid("peer-index").sourceId("peer-source").nodeId("peer-node")
                .tempDirectoryPath(job.get("temp_dir").asText()).build();
        return metadata(QuickwitSplit.mergeSplits(inputs, job.get("split").asText(), config));
    }

    private static ObjectNode metadata(QuickwitSplit.SplitMetadata m) {
        ObjectNode result = JSON.createObjectNode();
        result.put("split_id", m.getSplitId());
        result.put("num_docs", m.getNumDocs());
        result.put("uncompressed_size_bytes", m.getUncompressedSizeBytes());
        result.put("footer_start", m.getFooterStartOffset());
        result.put("footer_end", m.getFooterEndOffset());
        result.put("doc_mapping_json", m.getDocMappingJson());
        result.put("num_merge_ops", m.getNumMergeOps());
        result.put("delete_opstamp", m.getDeleteOpstamp());
        return result;
    }

    private Peer() {}
}
