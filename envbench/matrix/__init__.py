"""What to run: the matrix file read strictly, validated into models, and the sources of its
packages as this machine sees them.

models.py    environments, targets, benchmark settings; parse and load with key-path errors
yamlio.py    YAML without duplicate keys, numbers that keep their text
grammars.py  what the matrix may put into a Dockerfile or hand the engine
sources.py   ${VAR} expansion, wheelhouses, indexes, pinned requirements
"""
