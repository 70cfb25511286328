"""pegboard's built-in plugin, written against the public API only."""

__all__ = ()
