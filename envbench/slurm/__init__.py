"""Slurm clusters without Docker on their nodes: a target's cells as the steps of one batch
job, each in a container runtime the nodes have (Podman, Apptainer, Enroot/Pyxis), images
and results in a folder every node sees. Built on the login node, run on a compute node.
"""
