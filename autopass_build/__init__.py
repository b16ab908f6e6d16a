"""autopass: record a C/C++ build, tune per-file compiler flags, apply them."""

__version__ = "0.1.0"
