"""Stage 1, syntax: pattern text -> IR. grammar.lark is the language; _lalr_standalone.py is Lark's parser
generated from it (_lalr.py); parser.py runs it and builds the IR of ir.py, with RA1xx errors."""
