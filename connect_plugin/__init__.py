"""Spark Connect client plugin (table API, SQL commands, ``indexquery``): a later milestone.

It will build Spark plans only; it must never import tantivy or need storage credentials.
"""
