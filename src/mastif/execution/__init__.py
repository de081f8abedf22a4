"""The jobs that call models: a stack's runs (the harness's side in ``runner``, the
framework's in its own environment: ``frameworkenv``, ``stack_worker``, ``worker``), their
judging, the experiment's config, the cost model, budget, status and cluster projection.
May import core, tools, web, tasks, providers, protocols, frameworks and evaluation."""
