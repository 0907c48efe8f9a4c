"""The index file: SQLite schema, reads and writes (`db`), the single-writer lock, outlines and name suggestions."""
