"""The output contract on the host: reading results as bench's schema says, what makes two
results one measurement, and where each cell's result lives.

contract.py  strict JSON, bench's JSON Schema, older schemas upgraded on read
identity.py  one cell identity: file names, resume and the report's groups use it
store.py     result files: read, current or not, written atomically
"""
