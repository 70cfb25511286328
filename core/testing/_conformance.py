"""PluginConformance: the test class plugin authors subclass in their own suite."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import anyio

from pegboard._confined import ConfineMode

from ._checks import run_subject
from ._subject import Example, Files, Subject

if TYPE_CHECKING:
    import pytest

__all__ = ("PluginConformance",)


class PluginConformance:
    """Subclass it, name your plugin, and pytest checks that it keeps pegboard's laws.

    ::

        class TestNotes(PluginConformance):
            plugin = "notes"  # the entry-point name, or the module or object
            examples = (Example(tool="notes_count", input={}),)

    Each check is one test, run on every backend in ``backends`` (a backend
    that is not installed is skipped). A failing test names the law the plugin
    broke and how to fix it; a check with nothing to judge is skipped with the
    reason. The class needs no pytest import; set its attributes:

    - ``plugin``: an installed plugin name, a ``module[:attribute]`` reference,
      or the plugin object itself;
    - ``name``: what an object is installed as (default: its name);
    - ``options``: the plugin's options, as a host or ``pegboard.toml`` gives them;
    - ``trusted``: whether the host trusts it with the trusted services (a trusted
      plugin runs in the test's process, as hosts run it);
    - ``confine``: ``"auto"`` (default) runs an untrusted plugin confined in a
      sandboxed worker, as hosts do; ``"required"`` confined or not at all;
      ``"off"`` in the test's process;
    - ``network``: whether the host grants the plugin the network (confined plugins
      have none otherwise);
    - ``examples``: `Example` calls of its tools and how each should settle;
    - ``files``: what every fresh Location starts with, a mapping of relative
      paths to ``str`` or ``bytes``, or a folder to copy;
    - ``timeout``: seconds one call or activation may take;
    - ``skip``: tools the checks must not call, each mapped to the reason
      (a tool that neither an example nor a generated input exercised is
      otherwise "not verified", and fails);
    - ``expected_failures``: tools expected to fail on every generated input,
      each mapped to the reason (a tool that fails on every input otherwise fails);
    - ``generated``: how many inputs to draw from each tool's input schema;
    - ``blocking_threshold``: seconds the plugin may hold the event loop (0.1);
    - ``import_threshold``: seconds importing its module may take (1.0).
    """

    plugin: ClassVar[object]
    name: ClassVar[str | None] = None
    options: ClassVar[Mapping[str, Any]] = {}
    trusted: ClassVar[bool] = False
    confine: ClassVar[ConfineMode] = "auto"
    network: ClassVar[bool] = False
    examples: ClassVar[Sequence[Example]] = ()
    files: ClassVar[Files] = None
    timeout: ClassVar[float] = 10.0
    skip: ClassVar[Mapping[str, str]] = {}
    expected_failures: ClassVar[Mapping[str, str]] = {}
    generated: ClassVar[int] = 25
    blocking_threshold: ClassVar[float] = 0.1
    import_threshold: ClassVar[float] = 1.0
    backends: ClassVar[Sequence[str]] = ("asyncio", "trio")

    @classmethod
    def subject(cls) -> Subject:
        """The plugin under test as these class attributes describe it."""
        plugin = getattr(cls, "plugin", None)
        if plugin is None:
            raise TypeError(f"{cls.__name__} must set `plugin` to the plugin under test")
        return Subject(
            plugin=plugin,
            name=cls.name,
            options=dict(cls.options),
            trusted=cls.trusted,
            examples=cls.examples,  # checked by Subject
            files=cls.files,
            timeout=cls.timeout,
            skip=dict(cls.skip),
            expected_failures=dict(cls.expected_failures),
            generated=cls.generated,
            blocking_threshold=cls.blocking_threshold,
            import_threshold=cls.import_threshold,
            confine=cls.confine,
            network=cls.network,
        )

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Run every check on each backend in ``backends``."""
        import pytest

        if "pegboard_backend" not in metafunc.fixturenames:
            return
        params = []
        for backend in self.backends:
            installed = backend == "asyncio" or importlib.util.find_spec(backend) is not None
            marks = () if installed else pytest.mark.skip(reason=f"{backend} is not installed")
            params.append(pytest.param(backend, marks=marks, id=backend))
        metafunc.parametrize("pegboard_backend", params)

    def _verify(self, check: str, backend: str, directory: Path) -> None:
        import pytest

        try:
            subject = self.subject()
        except (TypeError, ValueError) as error:  # a settings mistake: one clear line
            pytest.fail(f"{type(self).__name__}: {error}", pytrace=False)
        run = functools.partial(run_subject, subject, only=[check], directory=directory)
        [result] = anyio.run(run, backend=backend).results
        if result.status == "failed":
            pytest.fail(result.describe(), pytrace=False)
        if result.status == "skipped":
            pytest.skip(result.reason or "nothing to check")

    def test_activation(self, pegboard_backend: str, tmp_path: Path) -> None:
        """Activation registers at least one tool, through the Tools it is handed."""
        self._verify("activation", pegboard_backend, tmp_path)

    def test_definitions(self, pegboard_backend: str, tmp_path: Path) -> None:
        """Every definition has a valid name, a description and 2020-12 schemas."""
        self._verify("definitions", pegboard_backend, tmp_path)

    def test_examples(self, pegboard_backend: str, tmp_path: Path) -> None:
        """Every example settles as expected, with valid output and canonical content."""
        self._verify("examples", pegboard_backend, tmp_path)

    def test_generated(self, pegboard_backend: str, tmp_path: Path) -> None:
        """Every tool settles on inputs generated from its schema; none goes unexercised."""
        self._verify("generated", pegboard_backend, tmp_path)

    def test_blocking(self, pegboard_backend: str, tmp_path: Path) -> None:
        """Nothing the plugin runs blocks the event loop; its module imports quickly."""
        self._verify("blocking", pegboard_backend, tmp_path)

    def test_metadata(self, pegboard_backend: str, tmp_path: Path) -> None:
        """Metadata is a JSON object within its bound, never a copy of the output."""
        self._verify("metadata", pegboard_backend, tmp_path)

    def test_teardown(self, pegboard_backend: str, tmp_path: Path) -> None:
        """Closing a Location runs teardown and removes every tool registered for it."""
        self._verify("teardown", pegboard_backend, tmp_path)

    def test_isolation(self, pegboard_backend: str, tmp_path: Path) -> None:
        """Two Locations with the plugin share no state."""
        self._verify("isolation", pegboard_backend, tmp_path)

    def test_cancellation(self, pegboard_backend: str, tmp_path: Path) -> None:
        """A call cancelled while its tool awaits yields no outcome."""
        self._verify("cancellation", pegboard_backend, tmp_path)

    def test_invalid_input(self, pegboard_backend: str, tmp_path: Path) -> None:
        """Input a tool's schema refuses never reaches the tool."""
        self._verify("invalid_input", pegboard_backend, tmp_path)

    def test_side_effects(self, pegboard_backend: str, tmp_path: Path) -> None:
        """The plugin writes, connects, reads and leaves behind nothing it should not."""
        self._verify("side_effects", pegboard_backend, tmp_path)

    def test_hooks(self, pegboard_backend: str, tmp_path: Path) -> None:
        """execute_after and prepare_request hooks behave."""
        self._verify("hooks", pegboard_backend, tmp_path)
