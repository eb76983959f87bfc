"""One image per environment: its lock, its wheels, its Dockerfile, its build.

lock.py        pip stacks resolved once into locks/<env>.pylock.toml (uv, sha256 per wheel)
wheelcache.py  one host cache of wheels, addressed by sha256
wheelhouse.py  wheelhouses the host's pip fetches for machines without an index
dockerfile.py  Dockerfiles rendered from templates/ (package data), content-hash tags
build.py       builds through the Docker SDK: context, base image, streamed log
baseimage.py   the Debian base (the engine's, pulled, or debootstrapped), and it with Python
"""
