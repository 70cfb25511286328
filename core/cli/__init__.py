"""The ``pegboard`` command: an application on top of the library's public API."""

from ._main import main

__all__ = ("main",)
