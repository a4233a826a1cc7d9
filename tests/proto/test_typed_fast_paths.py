"""The compiled paths of array topics: the writer's remembered layouts
(``PacketWriter._remember_layout``: ``pub(ndarray)`` of a layout published before
skips the encoder) and the reader's compiled viewer (``a0py.proto._ndarray``:
``pkt.array()`` of a layout read before, with no parsing). Each must give exactly
what the checking Python paths give, refuse what they refuse, and keep the
guarantees of zero-copy reads (read-only, an eviction during the read is an
error, a view kept past its block stays memory-safe)."""

import numpy as np
import pytest
from helpers.procs import CTX, join_ok, recv

import a0py
from a0py import ArgumentError, FrameEvictedError
from a0py.proto import arrays, typed
from a0py.proto import topic as tp
from a0py.proto.errors import DecodeError

pytestmark = pytest.mark.slow


def _payloads(topic):
    sub = a0py.SubscriberSync(topic, init=a0py.INIT_OLDEST)
    out = []
    while (pkt := sub.read()) is not None:
        out.append(pkt.payload)
    return out


def _encoded(array):
    """The payload the (Python) encoder makes of `array`."""
    prefix = arrays.array_prefix(array)
    return prefix + arrays.body_of(array).tobytes()


LAYOUTS = [
    np.arange(12, dtype=np.float64),
    np.arange(12, dtype=np.int64),                        # same itemsize and shape, another dtype
    np.arange(12, dtype=np.float64).reshape(3, 4),
    np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)),
    np.arange(12, dtype=">i4").reshape(4, 3),
    np.arange(6, dtype=np.float16)[:, None],              # a length-1 dimension
    np.array(2.5),
    np.zeros((0, 3), np.uint8),
]


def test_remembered_layouts_publish_exactly_what_the_encoder_makes(root):
    pub = a0py.Publisher("layouts")
    sent = []
    for round_ in range(3):  # the first round encodes, the next ones come from the writer's memory
        for k, layout in enumerate(LAYOUTS):
            value = np.asarray(layout + round_ * 7 + k, dtype=layout.dtype)
            if layout.flags.f_contiguous and not layout.flags.c_contiguous:
                value = np.asfortranarray(value)
            pub.pub(value)
            sent.append(value)
    got = _payloads("layouts")
    assert len(got) == len(sent)
    for payload, value in zip(got, sent):
        assert payload == _encoded(value)
    sub = a0py.SubscriberSync("layouts", init=a0py.INIT_OLDEST)
    for value in sent:
        arr = sub.read().array()
        assert arr.dtype == value.dtype and arr.shape == value.shape
        assert arr.flags.f_contiguous == value.flags.f_contiguous
        np.testing.assert_array_equal(arr, value)


def test_a_bad_array_after_a_remembered_layout_is_still_refused(root):
    pub = a0py.Publisher("after")
    pub.pub(np.arange(10, dtype=np.int64))
    pub.pub(np.arange(10, dtype=np.int64))
    with pytest.raises(ArgumentError, match="topic 'after': the array is not contiguous"):
        pub.pub(np.arange(20, dtype=np.int64)[::2])  # shape (10,) too, other strides
    with pytest.raises(ArgumentError, match="topic 'after': the array is not contiguous"):
        pub.pub(np.arange(20, dtype=np.int64).reshape(10, 2)[:, 0])
    with pytest.raises(ArgumentError, match="cannot be published"):
        pub.pub(np.array(["a"] * 10))
    assert len(_payloads("after")) == 2


def test_remember_layout_keeps_only_one_block_buffers(root):
    pub = a0py.Publisher("remember")
    assert pub._remember_layout(np.arange(4.0), b"head") is True
    assert pub._remember_layout(np.arange(8.0)[::2], b"head") is False  # strided
    assert pub._remember_layout(3, b"head") is False                    # no buffer
    with pytest.raises(ArgumentError, match="prefix must be bytes"):
        pub._remember_layout(np.arange(4.0), "head")


def test_a_layout_token_matches_by_identity_and_shape(root):
    # The writer remembers a dtype object, not a format string: an equal dtype
    # made anew (another object) goes to the encoder, an int64 array of the same
    # itemsize and shape never takes a float64 layout's prefix.
    pub = a0py.Publisher("token")
    f8 = np.dtype(np.float64)
    same_f8 = f8.newbyteorder("=")  # equal, another object
    assert same_f8 == f8 and same_f8 is not f8
    sent = [np.arange(6.0), np.arange(6.0) + 1, np.arange(6.0).view(same_f8) + 2,
            np.arange(6, dtype=np.int64), np.arange(6.0).reshape(2, 3), np.arange(6.0) + 3,
            np.arange(6, dtype=">i4"), np.arange(6, dtype=">i4") + 1]
    for value in sent:
        pub.pub(value)
    got = _payloads("token")
    assert got == [_encoded(value) for value in sent]


def test_remember_layout_with_a_token_checks_its_attribute(root):
    pub = a0py.Publisher("token_attr")
    assert pub._remember_layout(np.arange(4.0), b"head", "dtype") is True
    assert pub._remember_layout(np.arange(8.0)[::2], b"head", "dtype") is False  # strided
    with pytest.raises(ArgumentError, match="has no attribute 'nope'"):
        pub._remember_layout(np.arange(4.0), b"head", "nope")
    with pytest.raises(ArgumentError, match="token_attr must be a str"):
        pub._remember_layout(np.arange(4.0), b"head", 3)


def test_the_compiled_layout_hook_follows_every_change_of_layout_on_one_writer(root):
    # The publisher's ArrayLayouts (its writer's layout_hook) matches an array by its
    # type, dtype object, shape and strides, read from the array itself each time: a
    # shape changed in place, another dtype of the same size, more layouts than it
    # keeps, an ndarray subclass, all publish exactly what the encoder makes.
    class Sub(np.ndarray):
        pass

    pub = a0py.Publisher("hook")
    sent = []

    def publish(value):
        pub.pub(value)
        sent.append(_encoded(np.asarray(value)))

    publish(np.arange(6.0))
    hook = pub.layout_hook
    assert type(hook).__name__ == "ArrayLayouts" and len(hook) == 1
    reshaped = np.arange(6.0) + 1
    publish(reshaped)
    reshaped.shape = (2, 3)  # in place, after its layout was remembered
    publish(reshaped)
    publish(np.arange(6, dtype=np.int64))  # same size and shape, another dtype
    publish(np.arange(6.0).view(np.int64))
    for k in range(10):  # more layouts than it keeps
        publish(np.full(k + 1, k, np.int16))
    publish(np.arange(6.0).view(Sub))  # another array type, then back
    publish(np.arange(6.0) + 3)
    publish(np.arange(6.0) + 4)
    assert pub.layout_hook is hook and len(hook) == 1  # the last type's layouts only
    assert _payloads("hook") == sent


def test_array_layouts_keep_only_one_block_arrays_and_a_bounded_number(root):
    from a0py.proto import _ndarray

    layouts = _ndarray.ArrayLayouts()
    assert layouts.remember(np.arange(8.0)[::2], b"head") is False  # strided
    assert layouts.remember(np.zeros((1,) * 33), b"head") is False  # deeper than it keeps
    assert all(layouts.remember(np.zeros(k), b"head") for k in range(8))
    assert layouts.remember(np.zeros(9), b"head") is False and len(layouts) == 8
    with pytest.raises(TypeError):
        layouts.remember(np.zeros(3), "head")
    with pytest.raises(TypeError):
        layouts.remember([1.0], b"head")


def test_a_writer_takes_only_layout_hooks_and_a_hook_that_knows_nothing_changes_nothing(root):
    pub = a0py.Publisher("basehook")
    with pytest.raises(ArgumentError, match="layout hook must be an a0py LayoutHook"):
        pub._set_layout_hook(3)
    pub.pub(np.arange(3.0))
    pub._set_layout_hook(a0py._core.LayoutHook())  # knows no layout: the encoder serves
    pub.pub(np.arange(3.0) + 1)
    pub._set_layout_hook(None)
    pub.pub(np.arange(3.0) + 2)
    assert _payloads("basehook") == [_encoded(np.arange(3.0) + k) for k in range(3)]


def test_without_the_compiled_module_the_writer_keeps_layouts_by_dtype(root, monkeypatch):
    monkeypatch.setattr(arrays, "_compiled", [None])
    pub = a0py.Publisher("nohook")
    sent = [np.arange(4.0), np.arange(4.0) + 1, np.arange(4, dtype=np.int64), np.arange(4.0) + 2]
    for value in sent:
        pub.pub(value)
    assert pub.layout_hook is None
    assert _payloads("nohook") == [_encoded(value) for value in sent]


@pytest.mark.parametrize("zero_copy", [False, True])
@pytest.mark.parametrize("payload", [
    b"\x0a\x03<f8\x12\x01\x04\x22\x10" + bytes(16),              # shape 4 of f8 needs 32 bytes
    b"\x0a\x03<f8\x12\x01\x02\x1a\x02\x08\x10\x22\x10" + bytes(16),  # strides (8, 16) for shape (2,)
    b"\x0a\x03<f8\x12\x01\x04\x22\x20" + bytes(24),              # the known header, 8 bytes short
], ids=["size", "strides", "short"])
def test_a_bad_layout_after_a_compiled_view_is_a_decode_error(root, payload, zero_copy):
    pub = a0py.Publisher("badlayout")
    sub = a0py.SubscriberSync("badlayout", init=a0py.INIT_OLDEST)
    pub.pub(np.zeros(4))
    pub.pub(payload)
    pub.pub(np.ones(4))
    sub.read().array()  # the compiled viewer of (f8, 4) is made
    assert typed.typing_for("badlayout").array_hook.viewer is not None
    with pytest.raises(DecodeError, match=r"topic 'badlayout' seq 2: "):
        if zero_copy:
            with sub.read_view(0) as pkt:
                pkt.array()
        else:
            sub.read().array()
    assert (sub.read().array() == 1).all()  # the next one is read as before


def test_the_reader_views_known_layouts_in_compiled_code(root):
    assert arrays.compiled_module() is not None  # built here (numpy at build time)
    pub = a0py.Publisher("viewer")
    sub = a0py.SubscriberSync("viewer", init=a0py.INIT_OLDEST)
    for k in range(4):
        pub.pub(np.full((2, 3), k, np.int32))
        pub.pub(np.full(5, k, np.float32))  # alternating layouts: every read meets another
    for k in range(4):
        for shape, dtype in (((2, 3), np.int32), ((5,), np.float32)):
            arr = sub.read().array()
            assert arr.shape == shape and arr.dtype == dtype and (arr == k).all()
            assert not arr.flags.writeable
            with pytest.raises(ValueError):
                arr.setflags(write=True)
    hook = typed.typing_for("viewer").array_hook
    assert type(hook).__name__ == "PacketArrays" and hook.viewer is not None


def test_a_payload_with_a_known_header_but_another_size_is_parsed_and_refused(root):
    pub = a0py.Publisher("short")
    sub = a0py.SubscriberSync("short", init=a0py.INIT_OLDEST)
    pub.pub(np.arange(4.0))
    good = _payloads("short")[0]
    pub.pub(good[:-8])            # the same header bytes, its data 8 bytes short
    pub.pub(good + b"\x00" * 8)   # and 8 bytes long
    sub.read().array()            # the viewer of this header is made
    for _ in range(2):
        with pytest.raises(DecodeError, match="topic 'short' seq"):
            sub.read().array()


def test_the_python_viewer_serves_where_the_compiled_one_is_not_built(root, monkeypatch):
    monkeypatch.setattr(arrays, "_compiled", [None])
    pub = a0py.Publisher("pyview")
    sub = a0py.SubscriberSync("pyview", init=a0py.INIT_OLDEST)
    values = [np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(2, 3) + 1, np.arange(3, dtype=np.int8)]
    for value in values:
        pub.pub(value)
    for value in values:
        arr = sub.read().array()
        np.testing.assert_array_equal(arr, value)
        assert arr.dtype == value.dtype and not arr.flags.writeable
    assert typed.typing_for("pyview").array_hook is None  # no compiled hook: TopicTyping.array serves


@pytest.mark.parametrize("path", ["parsed", "compiled", "python", "image"])
def test_a_view_kept_past_its_block_holds_the_mapping(root, monkeypatch, path):
    if path == "python":
        monkeypatch.setattr(arrays, "_compiled", [None])
    pub = a0py.Publisher("kept")
    sub = a0py.SubscriberSync("kept", init=a0py.INIT_OLDEST)
    send = pub.pub_image if path == "image" else pub.pub
    send(np.full((16, 16), 1, np.uint8))
    send(np.full((16, 16), 2, np.uint8))
    if path != "parsed":
        sub.read().array()  # a first read of the layout: the next is viewed by its viewer
    with sub.read_view(0) as pkt:
        kept = pkt.array()
    with pytest.raises(a0py.ClosedError):
        pkt.array()
    sub.close()
    pub.close()
    arena = tp.forget_arena("kept", "pubsub")
    arena.close()  # deferred while the array's base holds the arena's buffer
    assert not arena.closed or kept.sum() >= 0  # closing: closed to new work...
    # ...and still mapped under the array (a dangling view would crash here)
    assert int(kept.sum()) == (2 if path != "parsed" else 1) * 256
    del kept


def _flooder(topic, conn):
    pub = a0py.Publisher(topic)
    while True:
        msg = conn.recv()
        if msg == "exit":
            return
        count = msg
        for k in range(count):
            pub.pub(np.full(4096, k % 250, np.uint8))
        conn.send("done")


def test_eviction_during_a_compiled_view_raises_instead_of_giving_torn_data(root, spawn, monkeypatch):
    monkeypatch.setenv("A0PY_ARENA_SIZE", "64k")
    parent, child = CTX.Pipe()
    p = spawn(_flooder, "fastevict", child)
    sub = a0py.SubscriberSync("fastevict")
    parent.send(2)
    assert recv(parent) == "done"
    with sub.read_view(timeout=10) as first:
        first.array()  # the viewer of this layout is made
    with pytest.raises(FrameEvictedError, match=r"topic 'fastevict'.*evicted while its zero-copy payload"):
        with sub.read_view(timeout=10) as pkt:
            arr = pkt.array()
            assert typed.typing_for("fastevict").array_hook.viewer is not None
            assert (arr == 1).all()
            parent.send(64)  # the publisher writes over the ring meanwhile
            assert recv(parent) == "done"
            with pytest.raises(FrameEvictedError):
                pkt.check_intact()
    nxt = sub.read()
    assert nxt.seq > pkt.seq + 1 and sub.missed == nxt.seq - pkt.seq
    parent.send("exit")
    join_ok(p)


def test_callback_subscribers_get_compiled_views_for_the_callbacks_duration(root, spawn):
    import threading

    parent, child = CTX.Pipe()
    p = spawn(_flooder, "fastcb", child)
    seen, done = [], threading.Event()

    def callback(pkt):
        arr = pkt.array()
        seen.append((arr.flags.writeable, int(arr[0]), arr.shape))
        if len(seen) == 3:
            done.set()

    sub = a0py.Subscriber("fastcb", callback, zero_copy=True)
    parent.send(3)
    assert recv(parent) == "done"
    assert done.wait(10)
    sub.close()
    assert seen == [(False, 0, (4096,)), (False, 1, (4096,)), (False, 2, (4096,))]
    assert sub.evicted == 0
    parent.send("exit")
    join_ok(p)
