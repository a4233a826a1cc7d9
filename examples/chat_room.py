"""The chat room of "Efficient, Imperative Dataspaces", in one process.

Each user is an actor. It asserts ``present(name)`` for as long as it is in
the room, observes ``present($who)`` to hear arrivals (``+``) and
departures (``-``), and observes ``speak($who, $what)``: utterances are sent
as messages (``!``), so nothing lingers in the dataspace once said.

    .venv/bin/python examples/chat_room.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a0py.dataspace import Dataspace, Record, parse


def join(ds, name, out):
    """Start a user: assert presence, listen to the room. Returns its facet."""
    user = ds.actor(name)
    user.observe(parse("present($who)"),
                 added=lambda who: out(f"{name} sees {who} arrive"),
                 removed=lambda who: out(f"{name} sees {who} leave"))
    user.observe(parse("speak($who, $what)"),
                 message=lambda who, what: out(f"{name} hears {who}: {what}"))
    user.assert_(Record("present", name))
    return user


def main(out=print):
    ds = Dataspace()
    alice = join(ds, "Alice", out)
    bob = join(ds, "Bob", out)  # Bob is told Alice is already here
    bob.send(Record("speak", "Bob", "Hello, Alice!"))
    alice.send(Record("speak", "Alice", "Hi Bob."))

    # A logger that only cares whether anyone at all is in the room: the
    # pattern present(_) erases who, so it sees one + and one -.
    log = ds.actor("log")
    log.observe(parse("present(_)"),
                added=lambda: out("log: room is occupied"),
                removed=lambda: out("log: room is empty"))

    alice.stop()  # retracts present("Alice"): Bob sees her leave
    bob.send(Record("speak", "Bob", "Bye!"))  # nobody else is listening
    bob.stop()
    out(f"assertions left: {len(ds.index)}")


if __name__ == "__main__":
    main()
