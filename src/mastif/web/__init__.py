"""The offline web sandbox: self-hosted sites and the API mimics, served on loopback.

:func:`mastif.web.app.build_app` makes the Starlette app (ShopSphere, StayFinder, CityPulse
and the LoopSearch engine, one module each in :mod:`mastif.web.sites`; the knowledge API
mimics are in :mod:`mastif.web.mimics`), :class:`mastif.web.server.SandboxServer` serves
it for the length of a benchmark, and :mod:`mastif.web.store` keeps each run's session
state, which a task's success check (:mod:`mastif.tasks.checks`) reads. This package's
``__init__`` imports nothing, so reading the state's shape does not load Starlette.

Owns the app (``app.py``), the sites (``sites/``) and what they share: their data
(``sitedata.py``), form fields and the 400/404 answers (``forms.py``), the session and
body-limit middleware (``middleware.py``), a cart's prices (``pricing.py``), the session
state (``store.py``); LoopSearch's index (``documents.py``) and BM25 engine (``search.py``);
the knowledge API mimics (``mimics/``); the server thread (``server.py``).

May import: mastif.core.
"""
