"""The C kernels are built by cffi (API mode); everything else lives in pyproject.toml."""
from setuptools import setup

setup(cffi_modules=["pyext/build_native.py:ffibuilder"])
