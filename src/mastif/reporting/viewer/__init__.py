"""The trace viewer: a static site of an experiment's runs (docs/viewer.md).

:func:`build_site` writes it (rule ``build_viewer``); ``mastif view`` serves it on loopback.

Owns what the viewer shows, as JSON-ready dicts (``export.py``), the site's writer, page,
script, style and data (``site.py``, the page's files in ``assets/``) and its server on
loopback (``serve.py``).

May import: mastif.core, mastif.tools, mastif.web, mastif.tasks, mastif.providers,
mastif.protocols, mastif.frameworks, mastif.evaluation, mastif.execution, mastif.analysis
(and mastif.reporting, its own).
"""

from mastif.reporting.viewer.site import SiteSummary, build_site

__all__ = ["SiteSummary", "build_site"]
