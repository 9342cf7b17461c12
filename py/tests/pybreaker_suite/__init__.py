"""pybreaker's own test module, run against breakerbank.compat.pybreaker (README.md)."""
