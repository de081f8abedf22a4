"""The design's three factors: every stack is one level of each (model × protocol × framework).

One definition for every table, test and figure that groups or tests by them (issue 39);
a stack's columns come in this order everywhere.
"""

from __future__ import annotations

#: the factors of the design, in the order of a stack's name (model/protocol/framework)
FACTORS: tuple[str, str, str] = ("model", "protocol", "framework")
#: the columns that identify a stack in every table: the factors
STACK_KEYS: tuple[str, str, str] = FACTORS
