"""The backend contract: one base class that declares every hook rearr reads of a backend.

A backend module (rearr/backends/numpy.py is the model) defines its step factories and a subclass of
`Backend`, and names one instance ``BACKEND``; the registry (rearr/backends/__init__.py) holds that
instance. The hooks come in two kinds:

- required: ``name``, ``STEPS`` and the functions that raise NotImplementedError here. ``STEPS`` is
  an explicit table from each step class of rearr.planning.plan to a factory ``f(step) -> call``,
  where ``call(x, env)`` runs that step on x (``env`` holds the index tensors of an indexed call; it
  is None otherwise).
- optional: everything with a default here, which says "nothing special": no explain templates, no
  native index checks, no cached indexed path, no unusual tensors.

The registry checks a backend against this class when it loads it (`check`), so a missing step kind
or function is an error that names it, before any pattern runs. A subclass overrides what differs:
dask's backend is numpy's with its own reshape, gathers and scatters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ..errors import RearrError
from ..planning.plan import STEP_KINDS, IndexUse

StepCall = Callable[[Any, Any], Any]  # (x, env: IndexEnv | None) -> x
StepFactory = Callable[[Any], StepCall]  # step -> its call, made once per plan and cached
CodeTemplate = Callable[..., list]  # (step, layout before it, names) -> the lines explain prints


class IndexEnv:
    """What the step calls of an indexed call read besides x: the index tensors by name, and the call's
    values. The run stage (rearr.run.indexed) makes one per call; a backend's program may make its own
    (jax rebuilds it inside its jax.jit program). It is the contract's, not the plan's: a Plan is data
    fixed before any tensor is seen.

    The index tensors sit in their own dict, so that an index may be named
    text, fill or into without taking the place of the call's own values.
    """

    __slots__ = ("checks", "fill", "indices", "into", "text")

    def __init__(self, text: str, indices: dict[str, Any], fill: object = 0, into: Any = None,
                 checks: bool | str = True) -> None:
        self.text = text  # the pattern, for the errors that the steps raise
        self.indices = indices  # index name -> its converted, checked tensor
        self.fill = fill  # scatter: the value of positions that nothing writes
        self.into = into  # scatter: the tensor the result starts from, or None
        self.checks = checks  # the call's check_bounds= (rules.arguments.CHECK_BOUNDS): how 'set' checks duplicates


class Backend:
    """Every hook of a backend. Subclasses set the class attributes and override the methods."""

    # --- required ----------------------------------------------------------------------------
    name: ClassVar[str]  # the framework, as messages name it ("numpy", "torch")
    STEPS: ClassVar[Mapping[type, StepFactory]]  # every class of plan.STEP_KINDS -> its factory

    def accepts(self, x: object) -> bool:
        """Whether x is a tensor of this framework (called only once the framework is imported)."""
        raise NotImplementedError

    def stack(self, xs: list) -> Any:
        """A list input of equal-shaped tensors as one tensor, along a new first axis."""
        raise NotImplementedError

    def concat(self, xs: list, axis: int) -> Any:
        """pack: the tensors joined along an existing axis."""
        raise NotImplementedError

    def einsum(self, spec: str, *xs: Any) -> Any:
        """einsum with a one-letter spec ("ab,bc->ac")."""
        raise NotImplementedError

    def matmul(self, a: Any, b: Any) -> Any:
        """a @ b: the matrix product over the last two axes, batched over the leading ones (a 1-D
        operand is a vector), as the Array API's matmul; einsum's lowering where EINSUM_MATMUL."""
        raise NotImplementedError

    def convert_index(self, value: object, like: Any, name: str, text: str, mode: bool | str = True) -> Any:
        """An index argument as an integer tensor on x's device, or the RearrError that says why not.
        ``mode`` is the call's check_bounds= (rearr.rules.arguments.CHECK_BOUNDS): a value check made here
        (an unsigned value beyond int64) follows it, as check_index does."""
        raise NotImplementedError

    def check_index(self, t: Any, use: IndexUse, text: str, mode: bool | str = True) -> Any:
        """The index with its range checked and negative values counted from the end. ``mode`` is
        True, "sync" or "async" (False skips the call): a backend whose arrays live on an accelerator
        checks there without a host read under "async" (and True, where it so documents); one whose
        values are in host memory makes the exact check in every mode."""
        raise NotImplementedError

    def dtype_kind(self, x: Any) -> str:
        """x's dtype as one of rearr.planning.policy.KINDS: bool, int, uint, float, complex or other."""
        raise NotImplementedError

    def dtype_range(self, x: Any) -> tuple:
        """The least and greatest finite value of x's dtype (a number kind)."""
        raise NotImplementedError

    def itemsize(self, x: Any) -> int:
        """Bytes per element of x's dtype."""
        raise NotImplementedError

    def to_numpy(self, x: Any) -> Any:
        """x as a numpy array (rearr.asnumpy): computed if lazy, copied to the host if it is elsewhere."""
        raise NotImplementedError

    # --- optional, with defaults -----------------------------------------------------------------
    # The framework's tensor type, once load() has run: the cached paths key on it. None: arrays of
    # many classes (the Array API), whose indexes always take the careful path.
    TENSOR: type | None = None
    # Explain's template for each step kind (then for every one) and for "einsum" (an einsum plan and the
    # operand names -> lines), or None: nothing to explain with.
    CODE: ClassVar[Mapping[type, CodeTemplate] | None] = None
    # Whether gather and scatter 'set' move dtypes that are not numbers (rearr.planning.policy).
    INDEXES_OTHER: ClassVar[bool] = False
    # Whether ready_index can say yes: indexed calls seen before then run from rearr.run.cache.DIRECT.
    READY_INDEXES: ClassVar[bool] = False
    # Whether einsum runs a two-operand (batched) matrix product as the plan's permutes and reshapes
    # around matmul() (planning.einsum.EinsumMatmul) instead of einsum(spec): what a person writes, and
    # what torch.compile's inductor fuses (its attention pattern matches matmul's graph, not einsum's).
    EINSUM_MATMUL: ClassVar[bool] = False

    def load(self) -> None:
        """Bind the framework (the registry calls this once, when its first tensor arrives): a module
        with templates does not import its framework at its top, so that explain can read them."""

    def checks_step_natively(self, step: object) -> bool:
        """Whether this step's native call refuses every out-of-range value of its index itself, each
        value against the axis it indexes (by its kind, or by the lowering its sizes choose). Never a
        step that reads flat row positions: a bad row there lands in the neighbouring batch."""
        return False

    def checks_natively(self, t: Any) -> bool:
        """Whether those native calls may check index tensor t themselves (e.g. not when traced)."""
        return False

    def ready_index(self, t: object, like: Any) -> bool:
        """Whether t is an index that convert_index returns as it is and the native calls may check:
        the cached indexed path's one test (see READY_INDEXES)."""
        return False

    def check_into(self, into: Any, x: Any) -> None:
        """Refuse an into= that the framework cannot copy into a result (the dtype and device checks
        are rearr's own)."""

    def unusual(self, x: object) -> str | None:
        """What kind of tensor x is when the framework refused it for its layout (sparse, nested,
        quantized ...), for the RearrError of rearr.run.call.refuse_unusual; None otherwise."""
        return None

    def program(self, steps: tuple, calls: tuple[StepCall, ...]) -> tuple[StepCall, ...]:
        """The calls that run a plan (``calls``: one per step, from STEPS): those, or fewer that do the
        same (jax joins an indexed plan into one jax.jit program, one dispatch per eager call)."""
        return calls


# The hooks by kind (tests/backends/test_contract.py checks that these name every hook of the class).
REQUIRED: tuple[str, ...] = ("accepts", "stack", "concat", "einsum", "matmul", "convert_index", "check_index",
                             "dtype_kind", "dtype_range", "itemsize", "to_numpy")
OPTIONAL: tuple[str, ...] = ("load", "checks_natively", "checks_step_natively", "ready_index", "check_into",
                             "unusual", "program")
ATTRIBUTES: tuple[str, ...] = ("name", "STEPS", "TENSOR", "CODE", "INDEXES_OTHER", "READY_INDEXES",
                               "EINSUM_MATMUL")


def native_calls(steps: tuple, backend: Backend) -> tuple[StepCall, ...]:
    """Each step as the backend's native call(s) (its STEPS factories, then its program hook). rearr.run
    compiles a call's Plan with it (adding the plan's dtype check); a backend compiles its own sub-plans
    with it (the steps that bring into= to a scatter's layout)."""
    table = backend.STEPS
    return backend.program(steps, tuple(table[type(step)](step) for step in steps))


def _defines(cls: type, name: str) -> bool:
    """Whether a subclass of Backend (not the base itself) defines name."""
    return any(name in vars(c) for c in cls.__mro__ if c is not Backend and c is not object)


def check(backend: object) -> None:
    """Raise a RearrError that lists everything the backend lacks of the contract."""
    label = type(backend).__name__
    if not isinstance(backend, Backend):
        raise RearrError(f"{label} is not a rearr.backends.contract.Backend", code="RA500",
                         hint="subclass rearr.backends.contract.Backend, and name an instance BACKEND in the module "
                         "(see docs/backends.md)")
    cls = type(backend)
    problems = [f"function {n}()" for n in REQUIRED if not _defines(cls, n)]
    problems += [f"attribute {n}" for n in ("name", "STEPS") if not _defines(cls, n)]
    steps = cls.STEPS if _defines(cls, "STEPS") else None
    if isinstance(steps, Mapping):
        missing = [k.__name__ for k in STEP_KINDS if k not in steps]
        if missing:
            problems.append(f"STEPS entries for {', '.join(missing)}")
        unknown = [getattr(k, "__name__", repr(k)) for k in steps if k not in STEP_KINDS]
        if unknown:
            problems.append(f"STEPS keys that are not step kinds of rearr.planning.plan: {', '.join(unknown)}")
        uncallable = [k.__name__ for k, f in steps.items() if k in STEP_KINDS and not callable(f)]
        if uncallable:
            problems.append(f"callable STEPS entries for {', '.join(uncallable)}")
    elif steps is not None:
        problems.append("STEPS as a mapping from step class to factory")
    code = cls.CODE
    if code is not None:
        missing = [k.__name__ for k in STEP_KINDS if not callable(code.get(k))]
        if missing:
            problems.append(f"CODE templates for {', '.join(missing)} (a backend that explains explains every step)")
        if not callable(code.get("einsum")):
            problems.append("a CODE template for 'einsum' (rearr.planning.einsum's plan, operand names -> lines)")
    if problems:
        raise RearrError(
            f"backend {label} lacks " + "; ".join(problems),
            code="RA500",
            hint="a backend subclasses rearr.backends.contract.Backend, overrides every required function and "
            "has a STEPS entry for each class of rearr.planning.plan.STEP_KINDS (see docs/backends.md)",
        )
