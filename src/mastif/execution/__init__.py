"""The jobs that call models, and what decides whether and where they run.

Owns a stack's runs: the harness's side (``runner.py``), the web its tools act on
(``webenv.py``), its resumable checkpoint (``checkpoint.py``), and its agents in their
framework's own environment (``frameworkenv.py``, ``stack_worker.py``, ``worker.py``); judging
a stack's runs (``judging.py``); reading and validating an experiment config
(``experiment.py``); the cost model of one run (``cost_model.py``), an experiment's estimate
before it runs (``estimate.py``), the run-wide budget ledger (``budget.py``) and a model job's
gate on it (``budget_gate.py``); an experiment's status (``status.py``) and a grid's projected
wall time on a node (``projection.py``).

May import: mastif.core, mastif.tools, mastif.web, mastif.tasks, mastif.providers,
mastif.protocols, mastif.frameworks, mastif.evaluation.
"""
