"""pegboard's pytest plugin: fixtures for plugin authors (registered through pytest11)."""

__all__ = ()
