"""Stage 3, planning: Recipe + shapes + lengths -> Plan, plain data (plan.py): the one length solver (lengths.py),
the steps (planner.py), einsum's plan (einsum.py), and the dtype rules checked before a plan runs (policy.py)."""
