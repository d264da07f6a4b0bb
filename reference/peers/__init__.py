"""Peer profiles: observable behaviour of named runtimes, separate from the normative reference."""
