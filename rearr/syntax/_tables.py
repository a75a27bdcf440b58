# Generated from rearr/grammar.lark by `python -m rearr.syntax._lalr`: Lark 1.3.1's LALR(1)
# analysis as plain data, which rearr/syntax/driver.py runs. Do not edit: edit grammar.lark, run it again.

GRAMMAR = (  # the text these tables were made from
    '// The whole pattern language of rearr, one LALR grammar.\n'
    '// Terminals are named so that error messages never show __ANON_n.\n'
    '\n'
    'pattern: side ARROW side     -> arrow_pattern\n'
    '       | side                -> bare_pattern\n'
    '\n'
    'side: operand (COMMA operand)*\n'
    '\n'
    'operand: dim*\n'
    '\n'
    '?dim: axis\n'
    '    | LPAR axis* RPAR        -> group\n'
    '    | STAR                   -> star\n'
    '\n'
    'axis: NAME index?            -> named\n'
    '    | INT                    -> anon\n'
    '    | ELLIPSIS               -> ellipsis\n'
    '\n'
    'index: LSQB NAME RSQB                 -> index_default\n'
    '     | LSQB NAME COLON NAME* RSQB     -> index_axes\n'
    '\n'
    'ARROW: "->"\n'
    'COMMA: ","\n'
    'LPAR: "("\n'
    'RPAR: ")"\n'
    'LSQB: "["\n'
    'RSQB: "]"\n'
    'COLON: ":"\n'
    'STAR: "*"\n'
    'ELLIPSIS: "..." | "…"\n'
    'INT: /[0-9]+(?!\\w)/\n'
    'NAME: /(?!\\d)\\w+/\n'
    '\n'
    '%import common.WS\n'
    '%ignore WS\n'
)
START = 'pattern'
LEXER = 'basic'

# (name, regular expression), in the order the lexer tries them
TERMINALS: tuple[tuple[str, str], ...] = (
    ('INT', '[0-9]+(?!\\w)'),
    ('WS', '(?:[ \t\x0c\r\n])+'),
    ('NAME', '(?!\\d)\\w+'),
    ('ELLIPSIS', '(?:\\.\\.\\.|…)'),
    ('ARROW', '\\->'),
    ('COLON', ':'),
    ('COMMA', ','),
    ('LPAR', '\\('),
    ('LSQB', '\\['),
    ('RPAR', '\\)'),
    ('RSQB', '\\]'),
    ('STAR', '\\*'),
)

# the terminals the lexer skips
IGNORE: tuple[str, ...] = ('WS',)

# rule number: (origin, builder method, children: k keep / s splice / d drop, ?rule with one child)
RULES: tuple[tuple[str, str, str, bool], ...] = (
    # 0: pattern: side ARROW side
    ('pattern', 'arrow_pattern', 'kkk', False),
    # 1: pattern: side
    ('pattern', 'bare_pattern', 'k', False),
    # 2: side: operand __side_star_0
    ('side', 'side', 'ks', False),
    # 3: side: operand
    ('side', 'side', 'k', False),
    # 4: operand: __operand_star_1
    ('operand', 'operand', 's', False),
    # 5: operand: (nothing)
    ('operand', 'operand', '', False),
    # 6: dim: axis
    ('dim', 'dim', 'k', True),
    # 7: dim: LPAR __dim_star_2 RPAR
    ('dim', 'group', 'ksk', False),
    # 8: dim: LPAR RPAR
    ('dim', 'group', 'kk', False),
    # 9: dim: STAR
    ('dim', 'star', 'k', False),
    # 10: axis: NAME index
    ('axis', 'named', 'kk', False),
    # 11: axis: NAME
    ('axis', 'named', 'k', False),
    # 12: axis: INT
    ('axis', 'anon', 'k', False),
    # 13: axis: ELLIPSIS
    ('axis', 'ellipsis', 'k', False),
    # 14: index: LSQB NAME RSQB
    ('index', 'index_default', 'kkk', False),
    # 15: index: LSQB NAME COLON __index_star_3 RSQB
    ('index', 'index_axes', 'kkksk', False),
    # 16: index: LSQB NAME COLON RSQB
    ('index', 'index_axes', 'kkkk', False),
    # 17: __side_star_0: COMMA operand
    ('__side_star_0', '__side_star_0', 'kk', False),
    # 18: __side_star_0: __side_star_0 COMMA operand
    ('__side_star_0', '__side_star_0', 'skk', False),
    # 19: __operand_star_1: dim
    ('__operand_star_1', '__operand_star_1', 'k', False),
    # 20: __operand_star_1: __operand_star_1 dim
    ('__operand_star_1', '__operand_star_1', 'sk', False),
    # 21: __dim_star_2: axis
    ('__dim_star_2', '__dim_star_2', 'k', False),
    # 22: __dim_star_2: __dim_star_2 axis
    ('__dim_star_2', '__dim_star_2', 'sk', False),
    # 23: __index_star_3: NAME
    ('__index_star_3', '__index_star_3', 'k', False),
    # 24: __index_star_3: __index_star_3 NAME
    ('__index_star_3', '__index_star_3', 'sk', False),
)

# per state (0 starts): terminal -> (shift, state) | (reduce, rule number) | (accept, 0)
ACTIONS: tuple[dict[str, tuple[str, int]], ...] = (
    # state 0
    {'$END': ('reduce', 5),
     'ARROW': ('reduce', 5),
     'COMMA': ('reduce', 5),
     'ELLIPSIS': ('shift', 1),
     'INT': ('shift', 2),
     'LPAR': ('shift', 3),
     'NAME': ('shift', 4),
     'STAR': ('shift', 5)},
    # state 1
    {'$END': ('reduce', 13),
     'ARROW': ('reduce', 13),
     'COMMA': ('reduce', 13),
     'ELLIPSIS': ('reduce', 13),
     'INT': ('reduce', 13),
     'LPAR': ('reduce', 13),
     'NAME': ('reduce', 13),
     'RPAR': ('reduce', 13),
     'STAR': ('reduce', 13)},
    # state 2
    {'$END': ('reduce', 12),
     'ARROW': ('reduce', 12),
     'COMMA': ('reduce', 12),
     'ELLIPSIS': ('reduce', 12),
     'INT': ('reduce', 12),
     'LPAR': ('reduce', 12),
     'NAME': ('reduce', 12),
     'RPAR': ('reduce', 12),
     'STAR': ('reduce', 12)},
    # state 3
    {'ELLIPSIS': ('shift', 1), 'INT': ('shift', 2), 'NAME': ('shift', 4), 'RPAR': ('shift', 12)},
    # state 4
    {'$END': ('reduce', 11),
     'ARROW': ('reduce', 11),
     'COMMA': ('reduce', 11),
     'ELLIPSIS': ('reduce', 11),
     'INT': ('reduce', 11),
     'LPAR': ('reduce', 11),
     'LSQB': ('shift', 15),
     'NAME': ('reduce', 11),
     'RPAR': ('reduce', 11),
     'STAR': ('reduce', 11)},
    # state 5
    {'$END': ('reduce', 9),
     'ARROW': ('reduce', 9),
     'COMMA': ('reduce', 9),
     'ELLIPSIS': ('reduce', 9),
     'INT': ('reduce', 9),
     'LPAR': ('reduce', 9),
     'NAME': ('reduce', 9),
     'STAR': ('reduce', 9)},
    # state 6
    {'$END': ('reduce', 4),
     'ARROW': ('reduce', 4),
     'COMMA': ('reduce', 4),
     'ELLIPSIS': ('shift', 1),
     'INT': ('shift', 2),
     'LPAR': ('shift', 3),
     'NAME': ('shift', 4),
     'STAR': ('shift', 5)},
    # state 7
    {'$END': ('reduce', 6),
     'ARROW': ('reduce', 6),
     'COMMA': ('reduce', 6),
     'ELLIPSIS': ('reduce', 6),
     'INT': ('reduce', 6),
     'LPAR': ('reduce', 6),
     'NAME': ('reduce', 6),
     'STAR': ('reduce', 6)},
    # state 8
    {'$END': ('reduce', 19),
     'ARROW': ('reduce', 19),
     'COMMA': ('reduce', 19),
     'ELLIPSIS': ('reduce', 19),
     'INT': ('reduce', 19),
     'LPAR': ('reduce', 19),
     'NAME': ('reduce', 19),
     'STAR': ('reduce', 19)},
    # state 9
    {'$END': ('reduce', 3), 'ARROW': ('reduce', 3), 'COMMA': ('shift', 18)},
    # state 10
    {'$END': ('accept', 0)},
    # state 11
    {'$END': ('reduce', 1), 'ARROW': ('shift', 20)},
    # state 12
    {'$END': ('reduce', 8),
     'ARROW': ('reduce', 8),
     'COMMA': ('reduce', 8),
     'ELLIPSIS': ('reduce', 8),
     'INT': ('reduce', 8),
     'LPAR': ('reduce', 8),
     'NAME': ('reduce', 8),
     'STAR': ('reduce', 8)},
    # state 13
    {'ELLIPSIS': ('shift', 1), 'INT': ('shift', 2), 'NAME': ('shift', 4), 'RPAR': ('shift', 21)},
    # state 14
    {'ELLIPSIS': ('reduce', 21), 'INT': ('reduce', 21), 'NAME': ('reduce', 21), 'RPAR': ('reduce', 21)},
    # state 15
    {'NAME': ('shift', 23)},
    # state 16
    {'$END': ('reduce', 10),
     'ARROW': ('reduce', 10),
     'COMMA': ('reduce', 10),
     'ELLIPSIS': ('reduce', 10),
     'INT': ('reduce', 10),
     'LPAR': ('reduce', 10),
     'NAME': ('reduce', 10),
     'RPAR': ('reduce', 10),
     'STAR': ('reduce', 10)},
    # state 17
    {'$END': ('reduce', 20),
     'ARROW': ('reduce', 20),
     'COMMA': ('reduce', 20),
     'ELLIPSIS': ('reduce', 20),
     'INT': ('reduce', 20),
     'LPAR': ('reduce', 20),
     'NAME': ('reduce', 20),
     'STAR': ('reduce', 20)},
    # state 18
    {'$END': ('reduce', 5),
     'ARROW': ('reduce', 5),
     'COMMA': ('reduce', 5),
     'ELLIPSIS': ('shift', 1),
     'INT': ('shift', 2),
     'LPAR': ('shift', 3),
     'NAME': ('shift', 4),
     'STAR': ('shift', 5)},
    # state 19
    {'$END': ('reduce', 2), 'ARROW': ('reduce', 2), 'COMMA': ('shift', 25)},
    # state 20
    {'$END': ('reduce', 5),
     'COMMA': ('reduce', 5),
     'ELLIPSIS': ('shift', 1),
     'INT': ('shift', 2),
     'LPAR': ('shift', 3),
     'NAME': ('shift', 4),
     'STAR': ('shift', 5)},
    # state 21
    {'$END': ('reduce', 7),
     'ARROW': ('reduce', 7),
     'COMMA': ('reduce', 7),
     'ELLIPSIS': ('reduce', 7),
     'INT': ('reduce', 7),
     'LPAR': ('reduce', 7),
     'NAME': ('reduce', 7),
     'STAR': ('reduce', 7)},
    # state 22
    {'ELLIPSIS': ('reduce', 22), 'INT': ('reduce', 22), 'NAME': ('reduce', 22), 'RPAR': ('reduce', 22)},
    # state 23
    {'COLON': ('shift', 27), 'RSQB': ('shift', 28)},
    # state 24
    {'$END': ('reduce', 17), 'ARROW': ('reduce', 17), 'COMMA': ('reduce', 17)},
    # state 25
    {'$END': ('reduce', 5),
     'ARROW': ('reduce', 5),
     'COMMA': ('reduce', 5),
     'ELLIPSIS': ('shift', 1),
     'INT': ('shift', 2),
     'LPAR': ('shift', 3),
     'NAME': ('shift', 4),
     'STAR': ('shift', 5)},
    # state 26
    {'$END': ('reduce', 0)},
    # state 27
    {'NAME': ('shift', 30), 'RSQB': ('shift', 31)},
    # state 28
    {'$END': ('reduce', 14),
     'ARROW': ('reduce', 14),
     'COMMA': ('reduce', 14),
     'ELLIPSIS': ('reduce', 14),
     'INT': ('reduce', 14),
     'LPAR': ('reduce', 14),
     'NAME': ('reduce', 14),
     'RPAR': ('reduce', 14),
     'STAR': ('reduce', 14)},
    # state 29
    {'$END': ('reduce', 18), 'ARROW': ('reduce', 18), 'COMMA': ('reduce', 18)},
    # state 30
    {'NAME': ('reduce', 23), 'RSQB': ('reduce', 23)},
    # state 31
    {'$END': ('reduce', 16),
     'ARROW': ('reduce', 16),
     'COMMA': ('reduce', 16),
     'ELLIPSIS': ('reduce', 16),
     'INT': ('reduce', 16),
     'LPAR': ('reduce', 16),
     'NAME': ('reduce', 16),
     'RPAR': ('reduce', 16),
     'STAR': ('reduce', 16)},
    # state 32
    {'NAME': ('shift', 33), 'RSQB': ('shift', 34)},
    # state 33
    {'NAME': ('reduce', 24), 'RSQB': ('reduce', 24)},
    # state 34
    {'$END': ('reduce', 15),
     'ARROW': ('reduce', 15),
     'COMMA': ('reduce', 15),
     'ELLIPSIS': ('reduce', 15),
     'INT': ('reduce', 15),
     'LPAR': ('reduce', 15),
     'NAME': ('reduce', 15),
     'RPAR': ('reduce', 15),
     'STAR': ('reduce', 15)},
)

# per state: nonterminal -> the state after it
GOTOS: tuple[dict[str, int], ...] = (
    # state 0
    {'__operand_star_1': 6, 'axis': 7, 'dim': 8, 'operand': 9, 'pattern': 10, 'side': 11},
    # state 1
    {},
    # state 2
    {},
    # state 3
    {'__dim_star_2': 13, 'axis': 14},
    # state 4
    {'index': 16},
    # state 5
    {},
    # state 6
    {'axis': 7, 'dim': 17},
    # state 7
    {},
    # state 8
    {},
    # state 9
    {'__side_star_0': 19},
    # state 10
    {},
    # state 11
    {},
    # state 12
    {},
    # state 13
    {'axis': 22},
    # state 14
    {},
    # state 15
    {},
    # state 16
    {},
    # state 17
    {},
    # state 18
    {'__operand_star_1': 6, 'axis': 7, 'dim': 8, 'operand': 24},
    # state 19
    {},
    # state 20
    {'__operand_star_1': 6, 'axis': 7, 'dim': 8, 'operand': 9, 'side': 26},
    # state 21
    {},
    # state 22
    {},
    # state 23
    {},
    # state 24
    {},
    # state 25
    {'__operand_star_1': 6, 'axis': 7, 'dim': 8, 'operand': 29},
    # state 26
    {},
    # state 27
    {'__index_star_3': 32},
    # state 28
    {},
    # state 29
    {},
    # state 30
    {},
    # state 31
    {},
    # state 32
    {},
    # state 33
    {},
    # state 34
    {},
)
