"""Cells in containers: the matrix expanded into cells, each run in a locked-down container.

expansion.py     environments x targets x sweep x repeats; each cell's bench options and identity
resources.py     what a cell may use: CPU quota, cores, threads, memory, GPUs
dataset.py       CIFAR-10 on the host: downloaded once, md5-checked, unpacked; its identity
containerrun.py  one cell in one container
records.py       the host's part of a record, and the one writer of failed-cell records
matrixrun.py     every selected cell: images built first, resume, GPU blocks before any build
summary.py       what a matrix run prints about its cells
progress.py      cells done, time left, each running cell's epochs
"""
