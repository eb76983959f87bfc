"""Cloud targets: one SkyPilot cluster per target with a ``cloud:`` block (nox -s cloud).

tasks.py   the SkyPilot task of a target, as a plain task-YAML dict (no SkyPilot import)
sky.py     the one place that imports SkyPilot: its Task/Resources, validation, catalog
plan.py    what a run would do and cost, before any money is spent (--dry-run)
fetch.py   results home from a job's log (the fallback when rsync fails)
"""
