"""Continuous backup's delta buffer, format and watch parsing (the stream itself runs against
real etcd in tests/integration/test_etcd_deltas.py)."""

from __future__ import annotations

import json

import pytest

from karmada_operator.backup import deltas
from karmada_operator.etcd.gateway import b64


def rev(n: int, size: int = 10, t: int = 0) -> deltas.Revision:
    return deltas.Revision(n, t, ((deltas.PUT, f"k{n}".encode(), b"x" * size, 0),))


def test_a_delta_is_due_when_its_oldest_change_waited_the_interval():
    buf = deltas.Buffer(after=10, interval=20.0, max_bytes=1 << 20)
    assert buf.wait(0.0) is None  # nothing pending: nothing due, however long
    buf.add(rev(11), now=100.0)
    buf.add(rev(12), now=115.0)
    assert buf.wait(110.0) == 10.0  # counted from the oldest, not the newest
    assert buf.wait(120.0) == 0.0
    delta = buf.take()
    assert (delta.first, delta.last, buf.after, buf.wait(200.0)) == (11, 12, 12, None)


def test_a_delta_is_due_at_once_when_it_holds_max_bytes():
    buf = deltas.Buffer(after=0, interval=20.0, max_bytes=1000)
    buf.add(rev(1, 500), now=0.0)
    assert buf.wait(0.0) == 20.0
    buf.add(rev(2, 500), now=0.0)
    assert buf.wait(0.0) == 0.0


def test_a_skipped_or_repeated_revision_is_a_gap():
    buf = deltas.Buffer(after=10, interval=1.0, max_bytes=100)
    with pytest.raises(deltas.Gap, match="skipped from 10 to 12"):
        buf.add(rev(12), now=0.0)
    buf.add(rev(11), now=0.0)
    with pytest.raises(deltas.Gap):
        buf.add(rev(11), now=0.0)


def test_encode_decode_round_trip_with_binary_keys_leases_and_deletes():
    delta = deltas.Delta((
        deltas.Revision(5, 1700000000123, ((deltas.PUT, b"\xff\x00bin", b"\x00\x01", 0),
                                           (deltas.PUT, b"leased", b"v", 7587))),
        deltas.Revision(6, 1700000000456, ((deltas.DELETE, b"a"), (deltas.DELETE, b"b"))),
    ))
    data = deltas.encode(delta)
    assert deltas.encode(delta) == data  # deterministic bytes
    assert deltas.decode(data) == delta
    assert delta.header()["events"] == 4


def test_parse_watch_groups_events_by_revision():
    line = json.dumps({"result": {"header": {"revision": "9"}, "events": [
        {"kv": {"key": b64("a"), "value": b64("1"), "mod_revision": "8"}},
        {"type": "DELETE", "kv": {"key": b64("b"), "mod_revision": "9"}},
        {"type": "DELETE", "kv": {"key": b64("c"), "mod_revision": "9"}},
    ]}})
    revisions, header = deltas.parse_watch(line.encode(), 42)
    assert header == 9
    assert revisions == [deltas.Revision(8, 42, ((deltas.PUT, b"a", b"1", 0),)),
                         deltas.Revision(9, 42, ((deltas.DELETE, b"b"), (deltas.DELETE, b"c")))]


def test_a_compacted_watch_start_is_a_gap():
    line = json.dumps({"result": {"header": {"revision": "90"}, "compact_revision": "50", "canceled": True}})
    with pytest.raises(deltas.Gap) as gap:
        deltas.parse_watch(line.encode(), 0)
    assert gap.value.compacted == 50


def test_select_stops_at_a_revision_or_a_time():
    chain = [deltas.Delta((rev(11, t=1), rev(12, t=2))), deltas.Delta((rev(13, t=3),))]
    assert [r.revision for r in deltas.select(chain, 10)] == [11, 12, 13]
    assert [r.revision for r in deltas.select(chain, 11)] == [12, 13]  # a later full: its own start
    assert [r.revision for r in deltas.select(chain, 10, up_to_revision=12)] == [11, 12]
    assert [r.revision for r in deltas.select(chain, 10, up_to_time_ms=2)] == [11, 12]
    with pytest.raises(deltas.Gap, match="revision 11 is missing"):
        deltas.select(chain[1:], 10)
