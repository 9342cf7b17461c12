"""Drop-in modules for code written against other circuit-breaker libraries.

``breakerbank.compat.pybreaker``: pybreaker's public API over breakerbank.
"""
