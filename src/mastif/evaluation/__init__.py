"""What a score is: the judge, the social values, the paper's metrics and their tables.

Owns one judgement of one run, its rubric prompt, JSON schema and parsing (``judge.py``);
social values per sentence and their stability, IVS/SVS (``values.py``), on ONNX Runtime
(``minilm_onnx.py``); each metric's definition and which runs count for it, Eqs. 1–5 and 8
(``measures.py``); the per-run and per-stack metric tables (``metrics.py``); the judge's
verdict against the tasks' checks per stack (``agreement.py``); stacks told apart by their
final answers (``answers.py``). Jobs that call the judge live in :mod:`mastif.execution`.

May import: mastif.core, mastif.tools, mastif.web, mastif.tasks, mastif.providers,
mastif.protocols, mastif.frameworks.
"""
