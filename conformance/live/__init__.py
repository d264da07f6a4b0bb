"""Live adapters: the real vLLM and SGLang allocators behind the conformance adapter protocols."""
