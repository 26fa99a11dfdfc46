"""Prices and the sum of usages: unit tests of judges/models/prices.py and Usage."""

from __future__ import annotations

from judges.models.prices import (
    DEFAULT_PRICES,
    IMAGE_TOKENS,
    MESSAGE_TOKENS,
    Price,
    cost_of,
    estimated_cost,
    estimated_input_tokens,
    price_of,
)
from judges.models.protocol import ImagePart, Message, ModelRequest, Usage
from judges.store.usage import usd


def test_a_listed_dated_snapshot_takes_its_models_price() -> None:
    assert price_of(DEFAULT_PRICES, "anthropic:claude-sonnet-4-5-20250929") == Price(input=3.0, output=15.0)


def test_a_snapshot_of_a_mini_model_takes_the_mini_price() -> None:
    assert price_of(DEFAULT_PRICES, "openai:gpt-4.1-mini-2025-04-14") == Price(input=0.4, output=1.6)


def test_a_name_is_never_priced_by_a_prefix() -> None:
    prices = {"gpt-x": Price(input=1.0, output=2.0)}
    assert (price_of(prices, "openai:gpt-x-2"), price_of(DEFAULT_PRICES, "openai:gpt-4o-2024-05-13"),
            price_of(DEFAULT_PRICES, "anthropic:claude-sonnet-4-5-experimental")) == (None, None, None)


def test_an_operators_price_of_a_model_covers_its_listed_snapshots() -> None:
    prices = {**DEFAULT_PRICES, "gpt-4o": Price(input=1.0, output=4.0)}
    assert price_of(prices, "openai:gpt-4o-2024-08-06") == Price(input=1.0, output=4.0)


def test_the_estimate_counts_ascii_at_a_token_per_three_bytes_any_other_byte_a_token_and_all_of_max_tokens() -> None:
    request = ModelRequest(system="s" * 30, messages=[Message.user("a" * 30 + "é" * 150)], max_tokens=1000)
    assert estimated_input_tokens(request) == 10 + 10 + 300 + 2 * MESSAGE_TOKENS  # 60 ASCII bytes, 300 others
    assert estimated_cost(Price(input=2.0, output=10.0), request) == round(((320 + 16) * 2 + 1000 * 10) / 1e6, 8)


def test_the_estimate_counts_an_image_at_the_most_a_vendor_counts() -> None:
    request = ModelRequest(messages=[Message.user(ImagePart(media_type="image/png", data_base64="AAAA"))])
    assert estimated_input_tokens(request) == IMAGE_TOKENS + 2 * MESSAGE_TOKENS


def test_an_image_on_an_openai_model_that_counts_images_otherwise_is_estimated_at_its_most() -> None:
    request = ModelRequest(messages=[Message.user(ImagePart(media_type="image/png", data_base64="AAAA"))])
    assert [estimated_input_tokens(request, m) - 2 * MESSAGE_TOKENS for m in (
        "openai:gpt-4o-mini-2024-07-18", "openai:gpt-4.1-nano", "gpt-4.1-mini", "anthropic:claude-sonnet-4-5")] == [
        48_169, 3_779, 2_489, IMAGE_TOKENS]


def test_a_full_model_string_overrides_the_name() -> None:
    prices = {**DEFAULT_PRICES, "openai-compatible:gpt-4o": Price(input=0, output=0)}
    assert price_of(prices, "openai-compatible:gpt-4o") == Price(input=0, output=0)


def test_an_unknown_model_has_no_cost() -> None:
    assert cost_of(DEFAULT_PRICES, "openai-compatible:llama3", Usage(input_tokens=10, output_tokens=5)) is None


def test_cost_is_tokens_times_price_per_million() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=200)
    assert cost_of({"m": Price(input=3.0, output=15.0)}, "anthropic:m", usage) == 0.006


def test_an_unknown_cost_makes_the_sum_unknown() -> None:
    total = Usage(cost_usd=0.5, requests=1) + Usage(cost_usd=None, requests=1)
    assert (total.cost_usd, total.requests) == (None, 2)


def test_usage_is_cached_only_when_every_reply_came_from_the_cache() -> None:
    assert (Usage(cache_hits=2).cached, (Usage(cache_hits=1) + Usage(requests=1)).cached, Usage().cached) == (
        True, False, False)


def test_dollars_are_written_without_trailing_zeros() -> None:
    assert [usd(5.0), usd(1.25), usd(0.000092), usd(0.0)] == ["$5", "$1.25", "$0.000092", "$0"]
