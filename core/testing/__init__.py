"""The conformance kit: check that a plugin keeps pegboard's laws, in pytest or a shell.

Subclass `PluginConformance` in a test suite, or run ``pegboard check PLUGIN``
(`run_cli`); both run the same checks (`run_checks`, `check`). The pytest
fixtures live in `pegboard.testing.fixtures`, loaded through the ``pytest11``
entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _exports

if TYPE_CHECKING:
    from ._checks import check, check_names, run_checks
    from ._cli import run_cli
    from ._conformance import PluginConformance
    from ._report import CheckResult, Problem, Report
    from ._runner import FakeRunner
    from ._subject import Example

__all__ = (
    "CheckResult",
    "Example",
    "FakeRunner",
    "PluginConformance",
    "Problem",
    "Report",
    "check",
    "check_names",
    "run_checks",
    "run_cli",
)

# pytest imports this package in every session (for the fixtures), so the kit
# itself is imported on first use, not then.
_HOMES = {
    "CheckResult": "._report",
    "Example": "._subject",
    "FakeRunner": "._runner",
    "PluginConformance": "._conformance",
    "Problem": "._report",
    "Report": "._report",
    "check": "._checks",
    "check_names": "._checks",
    "run_checks": "._checks",
    "run_cli": "._cli",
}


__getattr__, __dir__ = _exports(__name__, _HOMES, globals(), __all__)
