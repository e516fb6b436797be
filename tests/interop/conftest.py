"""The interop tests' ``java_hudi`` fixture lives in tests/conftest.py (shared with the
reliability tests' crash matrix: one JVM per session)."""
