"""The in-process dataspace: facets, turns, stopping, and the chat example."""

import importlib.util
from pathlib import Path

import pytest

from a0py.dataspace import (
    Dataspace,
    DataspaceTypeError,
    FacetStoppedError,
    Index,
    InvalidValueError,
    ParseError,
    Record,
    UnknownHandlerError,
    parse,
)

R = Record


def recorder():
    events = []
    return events, lambda ev, caps: events.append((ev, caps))


def test_assert_observe_retract():
    ds = Dataspace()
    a, b = ds.actor("a"), ds.actor("b")
    events, cb = recorder()
    b.observe("present($)", cb)  # text patterns are parsed
    h = a.assert_(R("present", "A"))
    assert events == [("+", ("A",))] and a.assertions == [R("present", "A")]
    a.retract(h)
    assert events[1:] == [("-", ("A",))] and len(ds.index) == 0
    with pytest.raises(UnknownHandlerError):
        a.retract(h)


def test_stopping_a_facet_retracts_its_assertions_and_its_children():
    ds = Dataspace()
    events, cb = recorder()
    ds.actor("watcher").observe(parse("[$, $]"), cb)
    parent = ds.actor("parent")
    child = parent.facet("child")
    grandchild = child.facet()
    parent.assert_(("p", 1))
    child.assert_(("c", 2))
    grandchild.assert_(("g", 3))
    events.clear()
    parent.stop()
    assert sorted(events) == [("-", ("c", 2)), ("-", ("g", 3)), ("-", ("p", 1))]
    assert not parent.running and not child.running and not grandchild.running
    assert len(ds.index) == 0
    parent.stop()  # stopping twice does nothing
    with pytest.raises(FacetStoppedError):
        child.assert_(("again",))
    with pytest.raises(FacetStoppedError):
        parent.send(("m",))


def test_stopped_facet_observers_hear_nothing_more():
    ds = Dataspace()
    events, cb = recorder()
    with ds.actor("listener") as listener:
        obs = listener.observe("x($)", cb)
        assert obs.live
    assert not obs.live
    ds.actor("talker").assert_(R("x", 1))
    assert events == []


def test_stopping_a_child_leaves_the_parent_running():
    ds = Dataspace()
    parent = ds.actor()
    child = parent.facet()
    child.assert_(1)
    parent.assert_(2)
    child.stop()
    assert parent.running and parent.children == []
    assert 1 not in ds.index and 2 in ds.index


def test_turn_is_one_patch_additions_first():
    ds = Dataspace()
    events, cb = recorder()
    ds.actor("obs").observe("[_]", cb)
    f = ds.actor("f")
    h = f.assert_((3,))
    assert events == [("+", ())]
    with f.turn():
        f.retract(h)
        f.assert_((4,))
        with ds.turn():  # nested turns commit with the outermost
            f.send(("msg", "not [_]"))
        assert events == [("+", ())] and (3,) in ds.index  # nothing applied yet
    assert events == [("+", ())]  # [3] -> [4] never showed an empty room
    assert (4,) in ds.index and (3,) not in ds.index


def test_messages_sent_in_a_turn_follow_its_assertions():
    ds = Dataspace()
    log = []
    obs = ds.actor("obs")
    obs.observe("ready($)", added=lambda x: log.append(("ready", x)))
    obs.observe("go($)", message=lambda x: log.append(("go", x)))
    f = ds.actor("f")
    with ds.turn():
        f.send(R("go", 1))
        f.assert_(R("ready", 1))
    assert log == [("ready", 1), ("go", 1)]


def test_observe_callbacks_split_by_event():
    ds = Dataspace()
    log = []
    f = ds.actor()
    obs = f.observe("speak($who, $what)",
                    added=lambda who, what: log.append(("+", who, what)),
                    removed=lambda who, what: log.append(("-", who, what)),
                    message=lambda who, what: log.append(("!", who, what)))
    h = f.assert_(R("speak", "A", "hi"))
    f.send(R("speak", "B", "yo"))
    f.retract(h)
    assert log == [("+", "A", "hi"), ("!", "B", "yo"), ("-", "A", "hi")]
    f.unobserve(obs)
    with pytest.raises(UnknownHandlerError):
        f.unobserve(obs)


def test_facet_argument_errors():
    ds = Dataspace()
    f = ds.actor()
    with pytest.raises(DataspaceTypeError, match="needs a callback"):
        f.observe("_")
    with pytest.raises(DataspaceTypeError, match="not both"):
        f.observe("_", print, added=print)
    with pytest.raises(InvalidValueError):
        f.assert_({1})
    with pytest.raises(InvalidValueError):
        f.send(parse("x($)"))
    other = ds.actor()
    h = other.assert_(1)
    with pytest.raises(UnknownHandlerError):
        f.retract(h)


def test_a_str_is_read_as_text_by_assert_send_and_observe_alike():
    """A str given to a facet is the text syntax, never a string fact: what
    observe('present($who)') matches, assert_('present("x")') asserts."""
    ds = Dataspace()
    f = ds.actor("f")
    seen = []
    f.observe("present($who)", added=lambda who: seen.append(("present", who)))
    f.observe('speak($who, "hi")', message=lambda who: seen.append(("speak", who)))
    f.observe('"hi"', added=lambda: seen.append(("str", "hi")))
    h = f.assert_('present("Alice")')
    assert h.value == R("present", "Alice") and ds.index.count(R("present", "Alice")) == 1
    f.send('speak("Bob", "hi")')
    assert "present(\"Alice\")" not in ds.index  # not stored as a string
    # The string value itself is written as its text, quoted.
    f.assert_('"hi"')
    assert ds.index.count("hi") == 1
    assert seen == [("present", "Alice"), ("speak", "Bob"), ("str", "hi")]
    # Index takes Python values only: there a str is a string.
    idx = Index()
    idx.add_assertion('present("Alice")')
    assert idx.assertions() == ['present("Alice")']


def test_a_str_that_is_not_text_is_refused_with_a_hint():
    ds = Dataspace()
    f = ds.actor()
    for call, hint in [
        (lambda: f.assert_("hello"), """assert_('"hello"')"""),
        (lambda: f.send("two words"), """send('"two words"')"""),
        (lambda: f.observe("x(", print), """observe('"x("')"""),
    ]:
        with pytest.raises(ParseError) as info:
            call()
        assert any("reads a str as the text syntax of parse()" in n and hint in n
                   for n in info.value.__notes__), info.value.__notes__
    with pytest.raises(InvalidValueError, match="is a pattern"):
        f.assert_("present($who)")
    with pytest.raises(InvalidValueError, match="is a pattern"):
        f.send("[_]")
    assert len(ds.index) == 0 and f.assertions == []


def test_callbacks_may_act_on_the_dataspace():
    ds = Dataspace()
    greeter = ds.actor("greeter")
    greeter.observe("present($who)",
                    added=lambda who: greeter.send(R("speak", "greeter", f"hello {who}")))
    heard = []
    ds.actor("ear").observe("speak(_, $what)", message=heard.append)
    ds.actor("alice").assert_(R("present", "Alice"))
    assert heard == ["hello Alice"]


def test_chat_room_example_runs():
    path = Path(__file__).resolve().parents[2] / "examples" / "chat_room.py"
    spec = importlib.util.spec_from_file_location("chat_room", path)
    chat = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(chat)
    lines = []
    chat.main(out=lines.append)
    assert "Bob sees Alice arrive" in lines
    assert "Alice hears Bob: Hello, Alice!" in lines
    assert "Bob sees Alice leave" in lines
    assert lines.count("log: room is occupied") == 1 and lines.count("log: room is empty") == 1
    assert lines.index("log: room is empty") > lines.index("Bob sees Alice leave")
    assert lines[-1] == "assertions left: 0"
