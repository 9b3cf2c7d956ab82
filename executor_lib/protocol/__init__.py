"""Protocol records: actions, file names and encodings, schema registry (standard library only)."""
