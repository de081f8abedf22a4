"""Web tasks: the record type, loaders for task sets, and reproducible sampling.

Owns the task record and its table (``model.py``); loading a task set by its source
(``loaders.py``): a local table (``files.py``) whose columns are mapped to task fields
(``records.py``), Mind2Web from the Hugging Face hub (``hub.py``); stratified sampling
(``sampling.py``); the sandbox tasks' programmatic success checks (``checks.py``).

May import: mastif.core, mastif.tools, mastif.web.
"""

from mastif.tasks.loaders import TaskLoadError, load_tasks, resources_dir
from mastif.tasks.model import TASK_SCHEMA, Task, level_for_steps, tasks_from_frame, tasks_to_frame
from mastif.tasks.sampling import stratified_sample

__all__ = [
    "TASK_SCHEMA",
    "Task",
    "TaskLoadError",
    "level_for_steps",
    "load_tasks",
    "resources_dir",
    "stratified_sample",
    "tasks_from_frame",
    "tasks_to_frame",
]
