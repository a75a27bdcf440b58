"""The backend contract: one abstract class that declares every hook rearr reads of a backend.

A backend module (rearr/backends/numpy.py is the model) defines a subclass of `Backend` and names it
``BACKEND``. The registry (rearr/backends/__init__.py) makes one instance of it when the framework's
first tensor arrives; its ``__init__`` imports the framework and binds it on the instance (``self.np``,
``self.torch``), so that a module imports without its framework (explain reads its ``CODE`` so).

What a backend must define is read from the class: each ``@abstractmethod`` below is required (the
dtype questions, index conversion and checks, the step factories), each method with a body here is
optional and its body is the default ("nothing special"), and ``name`` must be set. The step
factories (``reshape`` ... ``scatteralong``, one per class of rearr.planning.plan.STEP_KINDS) take a
step and return ``call(x, env)``, which runs it (``env``: the IndexEnv of an indexed call, else None);
``STEPS`` is the table of them that rearr reads. The registry refuses a class that lacks anything
(`check`), naming it, before any pattern runs.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ..errors import RearrError
from ..planning.plan import (
    PLAIN,
    STEP_KINDS,
    AdvancedIndex,
    Expand,
    GatherAlong,
    IndexUse,
    Permute,
    Reduce,
    Reshape,
    Results,
    ScatterAlong,
    ScatterRows,
    TakeRows,
)

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


class DirectIndexEnv(IndexEnv):
    """The IndexEnv of a checked call on the direct path (rearr.run.indexed.direct_program), made
    without IndexEnv's Python __init__: fill 0, no into= and checks on are this class's constants
    (they shadow IndexEnv's slots, so they cannot be set), and its maker sets text and indices alone.
    A tiny indexed call makes one per call."""

    __slots__ = ()
    __init__ = object.__init__
    fill, into, checks = 0, None, True


class Backend(abc.ABC):
    """Every hook of a backend: the abstract methods are required, the others have their defaults here."""

    name: ClassVar[str] = ""  # required: the framework, as messages name it ("numpy", "torch")
    # The framework's tensor type, bound by __init__: the cached paths key on it. None: arrays of many
    # classes (the Array API), whose indexes always take the careful path.
    TENSOR: type | None = None
    # Explain's template for each step kind and for "einsum" (an einsum plan and the operand names ->
    # lines), or None: nothing to explain with. Templates print text: they need no framework.
    CODE: ClassVar[Mapping[Any, CodeTemplate] | None] = None
    # Whether gather and scatter 'set' move dtypes that are not numbers (rearr.run.program's dtype check).
    INDEXES_OTHER: ClassVar[bool] = False
    # Whether ready_index can say yes: indexed calls seen before then run from rearr.run.cache.DIRECT.
    READY_INDEXES: ClassVar[bool] = False
    # Whether einsum runs a two-operand (batched) matrix product as the plan's permutes and reshapes
    # around matmul() (planning.einsum.EinsumMatmul) instead of einsum(spec): what a person writes, and
    # what torch.compile's inductor fuses (its attention pattern matches matmul's graph, not einsum's).
    EINSUM_MATMUL: ClassVar[bool] = False
    # What the native calls make of a result where frameworks differ (numpy's repeat is einops' np.tile, a
    # new array; torch's reductions give contiguous results): the planner plans around it so that each
    # result is laid out as einops' is. Where a field is set, expand() or permute() honours the steps'
    # view=False (write the result out).
    RESULTS: ClassVar[Results] = PLAIN

    def __init__(self) -> None:
        # Each step kind of rearr.planning.plan -> the factory that lowers it (rearr.run compiles plans with it).
        self.STEPS: Mapping[type, StepFactory] = {
            Reshape: self.reshape, Permute: self.permute, Reduce: self.reduce, Expand: self.expand,
            TakeRows: self.takerows, GatherAlong: self.gatheralong, AdvancedIndex: self.advancedindex,
            ScatterRows: self.scatterrows, ScatterAlong: self.scatteralong,
        }

    # --- required: arrays -------------------------------------------------------------------------

    @abc.abstractmethod
    def accepts(self, x: object) -> bool:
        """Whether x is a tensor of this framework (asked only once the framework is imported)."""

    @abc.abstractmethod
    def stack(self, xs: list) -> Any:
        """A list input of equal-shaped tensors as one tensor, along a new first axis."""

    @abc.abstractmethod
    def concat(self, xs: list, axis: int) -> Any:
        """pack: the tensors joined along an existing axis."""

    @abc.abstractmethod
    def einsum(self, spec: str, *xs: Any) -> Any:
        """einsum with a one-letter spec ("ab,bc->ac")."""

    @abc.abstractmethod
    def matmul(self, a: Any, b: Any) -> Any:
        """a @ b: the matrix product over the last two axes, batched over the leading ones (a 1-D
        operand is a vector), as the Array API's matmul; einsum's lowering where EINSUM_MATMUL."""

    @abc.abstractmethod
    def to_numpy(self, x: Any) -> Any:
        """x as a numpy array (rearr.asnumpy): computed if lazy, copied to the host if it is elsewhere."""

    # --- required: the dtype questions of rearr.run.program's check ---------------------------------

    @abc.abstractmethod
    def dtype_kind(self, x: Any) -> str:
        """x's dtype as one of rearr.planning.policy.KINDS: bool, int, uint, float, complex or other."""

    @abc.abstractmethod
    def dtype_range(self, x: Any) -> tuple:
        """The least and greatest finite value of x's dtype (a number kind)."""

    @abc.abstractmethod
    def itemsize(self, x: Any) -> int:
        """Bytes per element of x's dtype."""

    # --- required: indexes --------------------------------------------------------------------------

    @abc.abstractmethod
    def convert_index(self, value: object, like: Any, name: str, text: str, mode: bool | str = True) -> Any:
        """An index argument as an integer tensor on x's device, or the RearrError that says why not.
        ``mode`` is the call's check_bounds= (rearr.rules.arguments.CHECK_BOUNDS): a value check made here
        (an unsigned value beyond int64) follows it, as check_index does."""

    @abc.abstractmethod
    def check_index(self, t: Any, use: IndexUse, text: str, mode: bool | str = True) -> Any:
        """The index with its range checked and negative values counted from the end. ``mode`` is
        True, "sync" or "async" (False skips the call): a backend whose arrays live on an accelerator
        checks there without a host read under "async" (and True, where it so documents); one whose
        values are in host memory makes the exact check in every mode."""

    def check_indexes(self, items: list[tuple[Any, IndexUse]], text: str, mode: bool | str = True) -> list:
        """The checks of one call's indexes at once (``items``: each index with its use, in the plan's
        order): the checked indexes, in that order. The careful path asks it once per call, so that a
        backend whose indexes are spread over processes decides for all of them with one exchange (torch's
        DTensor: one all-reduce of a small flag); the default checks each with check_index, and the
        cached path of READY_INDEXES backends calls check_index itself."""
        return [self.check_index(t, use, text, mode) for t, use in items]

    # --- required: the step factories (step -> call(x, env)), one per class of plan.STEP_KINDS --------

    @abc.abstractmethod
    def reshape(self, step: Reshape) -> StepCall:
        """x viewed (or copied) as step.shape."""

    @abc.abstractmethod
    def permute(self, step: Permute) -> StepCall:
        """x's axes in step.perm's order."""

    @abc.abstractmethod
    def reduce(self, step: Reduce) -> StepCall:
        """step.reduction (a name, or a callable f(x, axes)) over step.axes."""

    @abc.abstractmethod
    def expand(self, step: Expand) -> StepCall:
        """x broadcast to step.shape (a view where the framework has them)."""

    @abc.abstractmethod
    def takerows(self, step: TakeRows) -> StepCall:
        """The rows of x (axis 0) at the flat row positions of step.terms."""

    @abc.abstractmethod
    def gatheralong(self, step: GatherAlong) -> StepCall:
        """x gathered along step.dim at step.term's index."""

    @abc.abstractmethod
    def advancedindex(self, step: AdvancedIndex) -> StepCall:
        """x[t0, t1, ...]: one index term for each leading axis."""

    @abc.abstractmethod
    def scatterrows(self, step: ScatterRows) -> StepCall:
        """The rows of x combined by step.reduction into step.rows rows, at the flat positions of step.terms
        (env: fill=, into=, and how 'set' checks duplicates)."""

    @abc.abstractmethod
    def scatteralong(self, step: ScatterAlong) -> StepCall:
        """x combined by step.reduction into step.shape along step.dim, at step.term's index."""

    # --- optional, with defaults ----------------------------------------------------------------------

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

    def index_fault(self, e: Exception) -> bool:
        """Whether e, raised by the native calls of a call with check_bounds=False, is their refusal of
        an index value (rearr reports it as RA501), not an unsupported dtype or a failed allocation,
        which keep their own type and message."""
        return isinstance(e, IndexError)

    def check_into(self, into: Any, x: Any) -> None:
        """Refuse an into= that the framework cannot copy into a result (the dtype and device checks
        are rearr's own)."""
        return None

    def place(self, t: Any) -> object:
        """Where tensor t lives, as two tensors of one call (into= and the source) must agree on it: its
        device, or None where the framework places it itself (a jax tracer or uncommitted array)."""
        return getattr(t, "device", None)

    def unusual(self, x: object) -> str | None:
        """What kind of tensor x is when the framework refused it for its layout (sparse, nested,
        quantized ...), for the RearrError of rearr.run.call.refuse_unusual; None otherwise."""
        return None

    def program(self, steps: tuple, calls: tuple[StepCall, ...]) -> tuple[StepCall, ...]:
        """The calls that run a plan (``calls``: one per step, from STEPS): those, or fewer that do the
        same (jax joins an indexed plan into one jax.jit program, one dispatch per eager call)."""
        return calls


def native_calls(steps: tuple, backend: Backend) -> tuple[StepCall, ...]:
    """Each step as the backend's native call(s) (its STEPS factories, then its program hook). rearr.run
    compiles a call's Plan with it (adding the plan's dtype check); a backend compiles its own sub-plans
    with it (the steps that bring into= to a scatter's layout)."""
    table = backend.STEPS
    return backend.program(steps, tuple(table[type(step)](step) for step in steps))


def lacks(cls: type) -> list[str]:
    """What the class lacks of the contract, in the order the contract declares it: its abstract
    methods left undefined, a name, and CODE templates for every step kind if it has any."""
    missing = [f"function {n}()" + _for_steps(cls, n) for n in _declared(cls) if n in cls.__abstractmethods__]
    if not cls.name:
        missing.append("attribute name")
    code = cls.CODE
    if code is not None:
        kinds = [k.__name__ for k in STEP_KINDS if not callable(code.get(k))]
        if kinds:
            missing.append(f"CODE templates for {', '.join(kinds)} (a backend that explains explains every step)")
        if not callable(code.get("einsum")):
            missing.append("a CODE template for 'einsum' (rearr.planning.einsum's plan, operand names -> lines)")
    return missing


def _for_steps(cls: type, name: str) -> str:
    """" (the factory of Reshape steps)" for a step factory, by the annotation of its step parameter."""
    kind = vars(Backend)[name].__annotations__.get("step") if name in vars(Backend) else None
    return f" (the factory of {kind} steps)" if kind else ""


def _declared(cls: type) -> list[str]:
    """The names the class's bases declare, base first, each once (the order of the contract above)."""
    return list(dict.fromkeys(n for c in reversed(cls.__mro__) for n in vars(c)))


def check(cls: object) -> None:
    """Raise a RearrError that lists everything the backend class lacks of the contract."""
    label = cls.__name__ if isinstance(cls, type) else type(cls).__name__
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise RearrError(f"{label} is not a subclass of rearr.backends.contract.Backend", code="RA500",
                         hint="subclass rearr.backends.contract.Backend, and name the class BACKEND in the module "
                         "(see docs/backends.md)")
    problems = lacks(cls)
    if problems:
        raise RearrError(
            f"backend {label} lacks " + "; ".join(problems),
            code="RA500",
            hint="a backend subclasses rearr.backends.contract.Backend and defines every abstract method: "
            "the array functions, the dtype questions, convert_index and check_index, and a step factory "
            "for each class of rearr.planning.plan.STEP_KINDS (see docs/backends.md)",
        )
