"""Statistics over the metric tables: what the experiment's data can and cannot carry.

Owns the paper's one-way tests with Dunn's post-hoc, *as in the paper* (``stats.py``); the
tests that respect the task blocks (``blocked.py``); mixed-effects and marginal models
(``mixed.py``) and one joint test per factor and interaction (``mixed_joint.py``); per-stack
effects with task-bootstrap intervals (``bootstrap.py``); reliability across repeats
(``repeats.py``); the smallest detectable difference before paying (``power.py``); the
judge against the tasks' checks (``judge_validity.py``) and a judge panel's agreement
(``judge_panel.py``); the one small-sample rule and the judge gate's verdict
(``inference.py``).

May import: mastif.core, mastif.tools, mastif.web, mastif.tasks, mastif.providers,
mastif.protocols, mastif.frameworks, mastif.evaluation, mastif.execution.
"""
