// Placeholder: filled in by the planner work in progress.
