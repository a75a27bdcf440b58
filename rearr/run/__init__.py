"""The run stage: a call's cached program, found or made, applied to its tensors.

    cache.py    the bounded tables, each with the one function that makes its key
    call.py     the call path of every op past its public function: the table look-ups of scatter
                and einsum, the careful path (transform, for rearrange, reduce and repeat), errors
                in context; asnumpy
    program.py  a Plan compiled to its program, one function run(x, env), after the plan's dtype check
    indexed.py  the careful path of calls with index brackets, and their programs
    einsum.py   einsum's careful path and its programs
    packing.py  pack and unpack
    parse_shape.py  parse_shape (its rule: rearr.planning.parse_shape)

Words: a Plan (rearr.planning.plan) is data; a program is the function compiled from it; to run is to
apply a program to a call's tensors. rearrange, reduce and repeat look their call up in cache.unindexed
themselves (rearr.api). ``import rearr`` loads cache.py and call.py; the others load on the first call
that needs them.
"""


def __getattr__(name: str) -> object:
    # packing and parse_shape load on their first use: `import rearr` and a first rearrange need
    # neither. Importing a submodule makes it an attribute of this package: found directly after.
    if name in ("packing", "parse_shape"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'rearr.run' has no attribute {name!r}")
