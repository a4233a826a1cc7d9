"""What the broker engine's random tests draw from: join subscriptions, retract
patterns and client names (broker/test_broker_engine.py's differential test
and broker/test_broker_engine_builds.py's comparison of the two builds)."""

from a0py.dataspace import DISCARD, parse

SUBSCRIPTIONS = [
    ('temp($room, $t)',),
    ('temp($room, $t)', 'setpoint($room, $s)'),
    ('edge($a, $b)', 'edge($b, $c)'),
    ('edge($a, $a)',),
    ('edge($a, $)', 'temp($, $a)'),
    ('temp($room, _)', 'setpoint($room, _)', 'edge($room, $x)'),
    ('setpoint(_, _)', 'temp($r, $t)'),
    ('edge($x, $y)', 'temp($z, $w)'),   # a cross product
    ('subscription($who, $id, _)',),
]
RETRACT_PATTERNS = [DISCARD, parse('temp($x, _)'), parse('edge($x, $x)'), parse('setpoint(1, $)'),
                    parse('edge(_, True)')]
CLIENTS = ["a", "b", "c"]
