"""The sandbox's four sites, one module each, every one a :class:`~mastif.web.sites.base.Site`.

:mod:`.search_engine` (LoopSearch and the start page), :mod:`.shop` (ShopSphere),
:mod:`.travel` (StayFinder) and :mod:`.events` (CityPulse); :mod:`.base` holds what they
share. They import only :mod:`mastif.web`'s own modules and :mod:`mastif.core`.

May import: mastif.core (and mastif.web, its own).
"""
