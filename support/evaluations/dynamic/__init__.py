"""The dynamic evaluation: a budgeted search for a model's failures over generated 3D tasks."""
