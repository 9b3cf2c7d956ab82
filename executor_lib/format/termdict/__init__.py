"""Term dictionaries: Tantivy's FST dictionaries (``fst``, ``fst_termdict``), the SSTable ones
IndexTables4Spark reads (``sstable``, ``sstable_columns``), and turning one into the other
(``convert``)."""
