"""What to run: the matrix file read strictly, validated into models, and the sources of its
packages as this machine sees them.

models.py    the matrix: parse and load with key-path errors (and every part's name)
environments.py, targets.py, benchmark.py   its three parts (pydantic)
fields.py    strict scalars, versions as text, values shown as written, cpusets
yamlio.py    YAML without duplicate keys, numbers that keep their text
grammars.py  what the matrix may put into a Dockerfile or hand the engine
sources.py   ${VAR} expansion, wheelhouses, indexes, pinned requirements
"""
