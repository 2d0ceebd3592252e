"""PYTORCH_CUDA_ALLOC_CONF: the settings the page offers, and a request against what the allocator reports."""

from core.memory.alloc_conf import parse_alloc_conf, settings_not_applied
from core.memory.steps import MIB


def test_alloc_conf_accepts_the_settings_the_page_offers():
    assert parse_alloc_conf("expandable_segments:True,max_split_size_mb:128") == {
        "expandable_segments": "True",
        "max_split_size_mb": "128",
    }
    assert parse_alloc_conf("garbage_collection_threshold:0.6") == {"garbage_collection_threshold": "0.6"}
    assert parse_alloc_conf("") == {}


def test_settings_not_applied_by_hand():
    reported = {"expandable_segments": True, "max_split_size": 128 * MIB, "garbage_collection_threshold": 0.6}
    asked = {"expandable_segments": "True", "max_split_size_mb": "128", "garbage_collection_threshold": "0.6"}
    assert settings_not_applied(asked, "native", reported) == []
    assert settings_not_applied({"max_split_size_mb": "256"}, "native", reported) == [
        f"max_split_size_mb: asked 256, the allocator reports max_split_size={128 * MIB}"
    ]
    assert settings_not_applied({"backend": "cudaMallocAsync"}, "native", reported) == [
        "backend: asked cudaMallocAsync, the allocator runs native"
    ]
    assert settings_not_applied({"backend": "cudaMallocAsync"}, "cudaMallocAsync", None) == []
