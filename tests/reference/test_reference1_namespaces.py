"""0x01A / 0x07F: namespace generations and successor namespaces."""

import pytest

from kvexact.reference.namespaces import (
    CacheIsolationNamespace,
    InvalidationReason,
    NamespaceRegistry,
    NamespaceRejection,
    authorize_lookup,
    authorize_publish,
    check_entry_scope,
    create_namespace,
    entry_visible,
    invalidate,
)
from kvexact.reference.rejections import Rejected


def ns(tenant="t1", nid="prod/t1"):
    return CacheIsolationNamespace("prod", tenant, nid, 0, "salt-a", 1)


def registry():
    return create_namespace(create_namespace(NamespaceRegistry(), ns()), ns("t2", "prod/t2"))


def reason_of(fn):
    with pytest.raises(Rejected) as info:
        fn()
    return info.value.reason


def test_successor_never_sees_old_entries():
    reg = registry()
    old = authorize_lookup(reg, "t1", "prod/t1", 0)
    entry_scope = old.scope
    reg2, receipt = invalidate(reg, "prod/t1", InvalidationReason.WEIGHTS)
    new = authorize_lookup(reg2, "t1", "prod/t1", 1)
    assert receipt.retired == old and receipt.successor == new
    assert new.generation == 1 and new.model_generation == 2
    assert entry_visible(old, entry_scope) and not entry_visible(new, entry_scope)
    assert reason_of(lambda: check_entry_scope(new, entry_scope)) is NamespaceRejection.STALE_ENTRY_GENERATION
    assert reason_of(lambda: authorize_lookup(reg2, "t1", "prod/t1", 0)) is NamespaceRejection.RETIRED_GENERATION
    assert reason_of(lambda: authorize_publish(reg2, entry_scope)) is NamespaceRejection.PUBLISH_TO_RETIRED_GENERATION
    authorize_publish(reg2, new.scope)
    assert reg.get("prod/t1").generation == 0  # the old registry value is unchanged


def test_isolation_reset_keeps_model_generation_and_can_rotate_salt():
    reg2, receipt = invalidate(registry(), "prod/t1", InvalidationReason.ISOLATION_RESET, cache_salt="salt-b")
    assert receipt.successor.model_generation == 1 and receipt.successor.cache_salt == "salt-b"
    assert receipt.successor.digest != receipt.retired.digest


def test_authorization_before_discovery():
    reg = registry()
    assert reason_of(lambda: authorize_lookup(reg, "t2", "prod/t1", 0)) is NamespaceRejection.UNAUTHORIZED_TENANT
    assert reason_of(lambda: authorize_lookup(reg, "t1", "nope", 0)) is NamespaceRejection.UNKNOWN_NAMESPACE
    assert reason_of(lambda: authorize_lookup(reg, "t1", "prod/t1", 3)) is NamespaceRejection.FUTURE_GENERATION
    assert reason_of(lambda: check_entry_scope(ns(), ("prod/t2", 0))) is NamespaceRejection.CROSS_NAMESPACE_ENTRY
    assert reason_of(lambda: create_namespace(reg, ns())) is NamespaceRejection.DUPLICATE_NAMESPACE
    assert reason_of(lambda: CacheIsolationNamespace("prod", "", "x", 0, None, 0)) is NamespaceRejection.BAD_NAMESPACE_FIELD
    assert reason_of(lambda: CacheIsolationNamespace("prod", "t", "x", -1, None, 0)) is NamespaceRejection.BAD_NAMESPACE_FIELD
