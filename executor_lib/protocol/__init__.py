"""Protocol records: actions, file names and encodings, schema registry.

Standard library only, plus the project's own ``executor_lib.errors`` (itself standard
library only) so that decoding errors are the project's exception types.
"""
