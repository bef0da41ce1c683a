"""consume_in_background: every item reaches the consumer in order, and an error on either side ends both threads
and reaches the caller (a routing task that hangs would hold its Spark slot forever)."""
from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

import pytest

from engine.write.background import consume_in_background


def test_the_consumer_gets_every_item_in_order_on_another_thread():
    seen: list[int] = []
    threads: set[str] = set()

    def consume(items: Iterable[int]) -> None:
        for item in items:
            threads.add(threading.current_thread().name)
            seen.append(item)

    consume_in_background(consume, iter(range(1000)), depth=4)
    assert seen == list(range(1000))
    assert threads == {"tidemark-route"}


def test_a_consumer_error_is_raised_here_and_the_rest_is_not_pulled():
    pulled: list[int] = []

    def produce() -> Iterator[int]:
        for i in range(10_000):
            pulled.append(i)
            yield i

    def consume(items: Iterable[int]) -> None:
        for item in items:
            if item == 10:
                raise ValueError("row 10 has an empty record key")

    with pytest.raises(ValueError, match="row 10"):
        consume_in_background(consume, produce(), depth=4)
    assert len(pulled) < 10_000


def test_an_error_after_the_last_item_is_raised_too():
    def consume(items: Iterable[int]) -> None:
        list(items)
        raise RuntimeError("the last flush failed")

    with pytest.raises(RuntimeError, match="last flush"):
        consume_in_background(consume, iter(range(100)), depth=4)


def test_a_producer_error_ends_the_consumer_and_is_raised():
    consumed: list[int] = []

    def produce() -> Iterator[int]:
        yield from range(5)
        raise OSError("the JVM closed the stream")

    with pytest.raises(OSError, match="JVM"):
        consume_in_background(lambda items: consumed.extend(items), produce(), depth=2)
    assert consumed == list(range(5))
    assert not any(t.name == "tidemark-route" for t in threading.enumerate())
