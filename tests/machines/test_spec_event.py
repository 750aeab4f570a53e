"""SpecEvent matches exactly as python-statemachine's Event does (SCXML dotted prefixes)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from statemachine.event import Event

from interlock.machines.backends.statemachine import SpecEvent

token = st.sampled_from(["a", "b", "ab", "ev_a", "after", "0", "1", "STEER", ""])
dotted = st.lists(token, min_size=1, max_size=4).map(".".join)
descriptor = st.one_of(dotted, dotted.map(lambda d: d + ".*"), dotted.map(lambda d: d + "."),
                       st.just("*"))


@settings(max_examples=2000, deadline=None)
@given(descriptor, dotted)
def test_same_verdict_as_the_library(desc: str, event: str) -> None:
    assert SpecEvent(id=desc, name=desc).match(event) == Event(id=desc, name=desc).match(event)


def test_prefix_match_is_by_whole_tokens() -> None:
    signal = SpecEvent(id="signal", name="signal")
    assert signal.match("signal") and signal.match("signal.STEER")
    assert not signal.match("signals") and not signal.match("sig")
