"""What a backend module provides, and the check that the registry runs when it loads one.

A backend is one module (rearr/backends/numpy.py is the model). Beside a few
module-level functions, it declares ``STEPS``: an explicit table from each step
class of rearr.plan to a factory ``f(step) -> call``, where ``call(x, env)``
runs that step on x (``env`` holds the index tensors of an indexed call; it is
None otherwise). A backend may also declare ``CODE``, explain's template for
each step kind (then for every one), and ``load()``, which the registry calls
first to bind a framework that the module does not import at its top (a
module with templates must not: explain reads them without the framework).
The registry checks the module against `Backend` when it loads it, so a
missing step kind or function is an error that names it, before any pattern
runs, not an AttributeError on the first pattern that needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Protocol

from ..errors import RearrError
from ..plan import STEP_KINDS, IndexEnv, IndexUse  # noqa: F401 (IndexEnv: the backends read it from here)

StepCall = Callable[[Any, Any], Any]  # (x, env: IndexEnv | None) -> x
StepFactory = Callable[[Any], StepCall]  # step -> its call, made once per plan and cached


class Backend(Protocol):
    """The module-level names of a backend (a module satisfies this Protocol structurally)."""

    name: str  # the framework, as messages name it ("numpy", "torch")
    TENSOR: type  # the framework's tensor type: the cached fast path keys on it
    STEPS: Mapping[type, StepFactory]  # every class of plan.STEP_KINDS -> its factory
    INDEXES_OTHER: bool  # whether gather and scatter 'set' can move dtypes that are not numbers (rearr.policy)

    def accepts(self, x: object) -> bool:
        """Whether x is a tensor of this framework (called only once the framework is imported)."""

    def stack(self, xs: list) -> Any:
        """A list input of equal-shaped tensors as one tensor, along a new first axis."""

    def concat(self, xs: list, axis: int) -> Any:
        """pack: the tensors joined along an existing axis."""

    def einsum(self, spec: str, *xs: Any) -> Any:
        """einsum with a one-letter spec ("ab,bc->ac")."""

    def convert_index(self, value: object, like: Any, name: str, text: str) -> Any:
        """An index argument as an integer tensor on x's device, or the RearrError that says why not."""

    def check_index(self, t: Any, use: IndexUse, text: str) -> Any:
        """The index with its range checked and negative values counted from the end."""

    def dtype_kind(self, x: Any) -> str:
        """x's dtype as one of rearr.policy.KINDS: bool, int, uint, float, complex or other."""

    def dtype_range(self, x: Any) -> tuple:
        """The least and greatest finite value of x's dtype (a number kind)."""

    def itemsize(self, x: Any) -> int:
        """Bytes per element of x's dtype."""

    def program(self, steps: tuple, calls: tuple[StepCall, ...]) -> tuple[StepCall, ...]:
        """The calls that run a plan (``calls``: one per step, from STEPS): those, or fewer that do the
        same (jax joins an indexed plan into one jax.jit program, one dispatch per eager call)."""


# Read from the Protocol, so that the check and the interface cannot disagree.
FUNCTIONS: tuple[str, ...] = tuple(n for n, v in vars(Backend).items() if callable(v) and not n.startswith("_"))
ATTRIBUTES: tuple[str, ...] = tuple(Backend.__annotations__)


def check(module: ModuleType) -> None:
    """Raise a RearrError that lists everything the module lacks of the contract."""
    problems = [f"function {n}()" for n in FUNCTIONS if not callable(getattr(module, n, None))]
    problems += [f"attribute {n}" for n in ATTRIBUTES if not hasattr(module, n)]
    steps = getattr(module, "STEPS", None)
    if isinstance(steps, Mapping):
        missing = [k.__name__ for k in STEP_KINDS if k not in steps]
        if missing:
            problems.append(f"STEPS entries for {', '.join(missing)}")
        unknown = [getattr(k, "__name__", repr(k)) for k in steps if k not in STEP_KINDS]
        if unknown:
            problems.append(f"STEPS keys that are not step kinds of rearr.plan: {', '.join(unknown)}")
        uncallable = [k.__name__ for k, f in steps.items() if k in STEP_KINDS and not callable(f)]
        if uncallable:
            problems.append(f"callable STEPS entries for {', '.join(uncallable)}")
    elif steps is not None:
        problems.append("STEPS as a mapping from step class to factory")
    code = getattr(module, "CODE", None)  # optional: explain's templates; all or none
    if code is not None:
        missing = [k.__name__ for k in STEP_KINDS if not callable(code.get(k))]
        if missing:
            problems.append(f"CODE templates for {', '.join(missing)} (a backend that explains explains every step)")
    if problems:
        raise RearrError(
            f"backend module {module.__name__} lacks " + "; ".join(problems),
            code="RA500",
            hint="a backend provides every name of rearr.backends.contract.Backend and a STEPS entry "
            "for each class of rearr.plan.STEP_KINDS (see docs/backends.md)",
        )
