"""C sources of the native runtime, built at install (setup.py) and loaded by `libraries.py`."""
