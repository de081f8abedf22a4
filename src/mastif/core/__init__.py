"""The lowest layer: the types, paths and plumbing every other subpackage shares.

Owns the experiment config's types and a stack's identity (``config.py``), the design's
three factors in their fixed order (``factors.py``), the one vocabulary of metrics — name,
label, unit, direction, scale, which runs count (``metric_registry.py``), the run trace every framework fills and
its Arrow schema (``trace.py``), where a run's wall clock went (``timing.py``), the layout of
``results/`` (``results.py``), mastif's own data paths, config and resources
(``paths.py``), files written whole or appended line by line (``atomic.py``), the dollars of
tokens at a price (``pricing.py``), the software versions behind a run (``provenance.py``),
the one uvicorn lifecycle for every server on loopback (``server.py``), a job's logging set-up
(``logsetup.py``) and text cut between words (``textclip.py``).

May import: no other subpackage of mastif (only the standard library and third-party
packages).
"""
