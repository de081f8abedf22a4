"""The trace viewer: a static site of an experiment's runs (docs/viewer.md).

:func:`build_site` writes it (rule ``build_viewer``); ``mastif view`` serves it on loopback.
"""

from mastif.reporting.viewer.site import SiteSummary, build_site

__all__ = ["SiteSummary", "build_site"]
