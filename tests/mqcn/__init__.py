"""Tests of MS-MQCN and of the directory events (shared_adm/directory.py)."""
