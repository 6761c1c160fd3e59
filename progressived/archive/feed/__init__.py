"""The table's side of the archive: its journal sent after the archived head."""
