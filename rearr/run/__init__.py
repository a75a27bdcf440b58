"""The run stage: a call's cached program, found or made, applied to its tensors.

    cache.py    the bounded tables, each with the one function that makes its key
    call.py     the call path of every op past its public function: the table look-ups of scatter,
                einsum and an indexed rearrange, the careful path, errors in context
    program.py  a Plan compiled to its program, one function run(x, env), after the plan's dtype check
    indexed.py  the careful path of calls with index brackets, and their programs
    einsum.py   einsum's careful path and its programs
    packing.py  pack, unpack, parse_shape and asnumpy

Words: a Plan (rearr.planning.plan) is data; a program is the function compiled from it; to run is to
apply a program to a call's tensors. rearrange, reduce and repeat look their call up in cache.plain
themselves (rearr.api). ``import rearr`` loads cache.py and call.py; the others load on the first call
that needs them.
"""


def __getattr__(name: str) -> object:
    # packing (pack, unpack, parse_shape, asnumpy) loads on its first use: `import rearr` and a first
    # rearrange do not need it. Importing it makes it an attribute of this package: found directly after.
    if name == "packing":
        from .packing import pack  # noqa: F401  (`from . import packing` would ask this function again)

        return globals()["packing"]
    raise AttributeError(f"module 'rearr.run' has no attribute {name!r}")
