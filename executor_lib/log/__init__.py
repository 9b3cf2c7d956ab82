"""Transaction log and table state: snapshots, commits, checkpoints, Avro state reading."""
