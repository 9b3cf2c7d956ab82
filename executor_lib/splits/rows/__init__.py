"""Rows out of a split: the columnar copy (``columnar``), rows kept in the doc stores
(``doc_store_rows``), the process's decoded-block cache (``decoded_cache``) and companion
splits' rows read from their Parquet sources (``companion``)."""
