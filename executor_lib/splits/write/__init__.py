"""Splits made: written (``writer``), merged (``merge``), merges planned (``merge_plan``) and
published to a table (``publish``)."""
