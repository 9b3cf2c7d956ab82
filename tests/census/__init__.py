"""Bad-input census (issue 20): every hostile input gets a clear error and changes nothing on disk."""
