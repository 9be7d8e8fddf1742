"""The SQLite state database in the state directory."""
