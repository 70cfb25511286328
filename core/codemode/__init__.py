"""Code Mode: one ``execute`` tool that runs model-written Python over a request's tools."""

from ._limits import CodeModeLimits
from ._tool import execute_tool

__all__ = ("CodeModeLimits", "execute_tool")
