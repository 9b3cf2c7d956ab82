"""One benchmark run for the whole project: ``python -m bench`` (see ``bench.__main__``).

Runs ``benchmarks/state_benchmark.py``, ``split_benchmark.py`` and ``spark_benchmark.py``
through their ``run()`` functions, prints one table of ratios against the baselines measured
in the same run, writes JSON, and with ``--png DIR`` draws bar charts (matplotlib, optional
extra ``bench``).
"""
