"""mastif — Multi-Agent System TestIng Framework.

Compares agent technology stacks (LLM x protocol x framework) on web tasks.
The package never imports snakemake; ``workflow/scripts`` are the only bridge.
Subpackages follow the pipeline's stages, in layers (docs/architecture.md, "Package layout
and layers"); each one's ``__init__`` says what it owns and may import.
"""

from mastif import _compat

__version__ = "0.1.0"

_compat.install()
