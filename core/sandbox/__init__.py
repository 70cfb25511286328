"""The one sandbox: a policy in, a confined process tree out (bubblewrap behind it).

``bash``, manifest commands and anything else that starts a process for a
Location asks its `Sandbox` (the trusted ``sandbox`` service) for a
`Confinement` per call, and runs the command line it returns.
"""

from __future__ import annotations

from ._policy import Mode, Policy, SandboxInfo, allowed_environment
from ._service import CallConfinement, Confinement, Sandbox, detect, installation, isolated

__all__ = (
    "CallConfinement",
    "Confinement",
    "Mode",
    "Policy",
    "Sandbox",
    "SandboxInfo",
    "allowed_environment",
    "detect",
    "installation",
    "isolated",
)
