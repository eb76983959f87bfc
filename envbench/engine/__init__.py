"""The Docker engine as every stage uses it: one connection, one lockdown, GPU access, and the
machine the engine runs on.

connection.py  connect, and the engine's failures as one sentence each
sandbox.py     how every container of the kit is locked down
gpu.py         device requests, the GPU probe, nvidia-smi through the engine, driver minimums
host.py        the engine host's CPUs and memory
"""
