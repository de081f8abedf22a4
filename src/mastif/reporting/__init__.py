"""What a reader sees: tables, figures, the report's items and the trace viewer.

Owns the paper's Tables 2–7 and their number formats (``report.py``); the tables that draw
inferences, Table 6, the per-section tests and the joint tests (``report_inference.py``); the
statistics tables beyond the paper's and the judge gate's caption (``stats_tables.py``); the
paper's figures (``plots.py``), the effects figure (``plots_effects.py``) and the joint
tests' figure the report leads with (``plots_joint.py``); the report's front page
(``front_page.py``); the text
``mastif estimate`` prints (``estimate_report.py``); the static trace viewer (``viewer/``).

May import: mastif.core, mastif.tools, mastif.web, mastif.tasks, mastif.providers,
mastif.protocols, mastif.frameworks, mastif.evaluation, mastif.execution, mastif.analysis.
"""
