"""The project's benchmarks: ``python -m bench`` runs them all (see ``bench.__main__``).

Each benchmark is a module with a ``run()`` function and its own command line
(``python -m bench.<name>_benchmark``: state, split, spark, ingest, analytics, compaction);
``bench.suite`` runs them together and turns their results into ratios against the baselines
measured in the same run, ``bench.charts`` draws them (``--png DIR``, optional extra ``bench``).
"""
