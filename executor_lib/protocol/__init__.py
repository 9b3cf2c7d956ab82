"""Protocol records: actions, file names and encodings, the schema registry, and the byte layout
of a split file (the Quickwit bundle, ``bundle``).

Standard library only, plus the project's own ``indextables_contract.errors`` (itself standard
library only) so that decoding errors are the project's exception types.
"""
