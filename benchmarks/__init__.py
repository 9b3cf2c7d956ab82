"""The benchmarks of the earlier milestones; `python -m bench` runs them together (see bench/)."""
