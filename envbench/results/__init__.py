"""The output contract on the host: reading results as bench's schema says, what makes two
results one measurement, the typed view the report reads, and where results live.

contract.py  strict JSON, bench's JSON Schema, older schemas upgraded on read
identity.py  one cell identity: file names, resume and the report's groups use it
record.py    a validated result, read through names
store.py     result files: read, current or not, written atomically, folders loaded
clusters.py  what each cloud cluster of a fan-out did and cost (runs.json)
"""
