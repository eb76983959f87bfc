"""The Docker engine as every stage uses it: one connection, one lockdown, GPU access.

connection.py  connect, and the engine's failures as one sentence each
sandbox.py     how every container of the kit is locked down
gpu.py         device requests, the GPU probe, nvidia-smi through the engine
"""
