"""Stage 1, syntax: pattern text -> IR. rearr/grammar.lark is the language; _tables.py holds the LALR(1)
tables that Lark made from it (_lalr.py writes them); driver.py runs them; parser.py builds the IR of
ir.py with them, with RA1xx errors."""

import os

GRAMMAR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "grammar.lark")
