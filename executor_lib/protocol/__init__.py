"""Protocol records: actions, file names and encodings, the schema registry.

Standard library only, plus the project's own ``indextables_contract.errors`` (itself standard
library only) so that decoding errors are the project's exception types. The split file's bytes
(the Quickwit bundle and hotcache) are ``executor_lib.format``.
"""
