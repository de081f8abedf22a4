"""Web tasks: the record type, loaders for task sets, and reproducible sampling."""

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
