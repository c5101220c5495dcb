"""crossbuild: cross-compile real C/C++ projects with zig cc and prove the result."""

__version__ = "0.1.0"
