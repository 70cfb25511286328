"""Plugins installed as a user's packages would be: a module and a dist-info beside it."""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ("install_plugin",)


def install_plugin(
    site: Path,
    name: str,
    source: str,
    *,
    module: str | None = None,
    distribution: str | None = None,
    version: str = "1.0",
    attribute: str = "",
) -> str:
    """Write plugin ``name`` into ``site`` (a folder on the path) as an installed
    distribution: its module, and a dist-info whose ``pegboard`` entry point names
    the module (and ``attribute``, such as ``":plugin"``). Returns the module's name.
    """
    module = module or f"pegboard_{name}"
    distribution = distribution or name
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
    )
    (info / "entry_points.txt").write_text(f"[pegboard]\n{name} = {module}{attribute}\n")
    return module
