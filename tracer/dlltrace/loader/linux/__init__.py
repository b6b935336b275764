"""The Linux loader model (glibc ld.so): rules.py, engine.py."""
