"""The kernel library (being written)."""
