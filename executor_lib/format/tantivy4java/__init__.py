"""What tantivy4java adds to a split: the Parquet companion manifest (``parquet_manifest``)."""
