"""One image per environment: its lock, its wheels, its Dockerfile, its build.

lock.py        pip stacks resolved once into locks/<env>.pylock.toml (uv, sha256 per wheel)
wheelcache.py  one host cache of wheels, addressed by sha256
dockerfile.py  Dockerfiles rendered from the templates, content-hash tags, builds
baseimage.py   a Debian base built locally (debootstrap), for hosts without a registry
"""
