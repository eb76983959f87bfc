"""The Docker engine as every stage uses it: one connection, one lockdown, GPU access, and the
machine the engine runs on.

connection.py  connect, and the engine's failures as one sentence each
reach.py       why no engine answers (standard library only: envbench.provision uses it
               before anything is installed, so this package's __init__ imports nothing)
spec.py        one container described once (mounts, environment, limits, lock-down)
sandbox.py     a spec as the Docker SDK's arguments
gpu.py         device requests, the GPU probe, nvidia-smi through the engine, driver minimums
host.py        the engine host's CPUs and memory
"""
