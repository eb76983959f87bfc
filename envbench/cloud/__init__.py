"""Cloud targets: one SkyPilot cluster per target with a ``cloud:`` block (./noxw -s cloud).

plan.py      what a run would do and cost, before any money is spent (--dry-run)
tasks.py     the SkyPilot task of a target, as a plain task-YAML dict (no SkyPilot import)
fanout.py    one cluster per target, concurrently; results home; every cluster down
fetch.py     results home from a job's log (the fallback when rsync fails)
launcher.py  the seam between the fan-out and whatever provides the VMs
sky.py       the one place that imports SkyPilot: its Task/Resources, validation, catalog
local.py     sshd containers on this machine standing in for VMs (the tests' launcher)
"""
