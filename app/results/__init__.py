"""Results: the field table, phase statistics, export (CSV/JSON/markdown) and the SQLite store."""
