"""The vLLM profile and the normative reference (Reference II) on the same random operation streams: the
machine is ``vllm_normative.VllmVsNormative``, whose docstring says what is driven and compared."""

from __future__ import annotations

from hypothesis import settings
from vllm_normative import VllmVsNormative

TestVllmVsNormative = VllmVsNormative.TestCase
_active = settings()
TestVllmVsNormative.settings = settings(_active, max_examples=max(_active.max_examples, 100))
