"""Tools for plugin authors to check their plugins keep pegboard's laws."""

__all__ = ()
