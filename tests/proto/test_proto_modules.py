"""How ``a0py.proto`` is divided, checked on its source and its public names:
one home for the protocol layer's errors, shared request/reply machinery that is
public in its module (no module imports another's ``_private`` name), and every
error reachable from the names users import."""

import ast
from pathlib import Path

import a0py
import a0py.proto
import a0py.proto.cfg
import a0py.proto.errors
import a0py.proto.prpc
import a0py.proto.rpc

PROTO = Path(a0py.proto.__file__).resolve().parent


def proto_sources():
    return sorted(p for p in PROTO.glob("*.py"))


def private_names_imported(path):
    """``module.name`` for each ``from module import _name`` in `path` that names no
    module file (importing a private *module* of the package, such as ``_dispatch``
    or the compiled ``_ndarray``, is allowed; borrowing a private *name* from another
    module is not)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = PROTO if node.level == 1 else None
        for alias in node.names:
            if not alias.name.startswith("_") or alias.name.startswith("__"):
                continue
            is_module = base is not None and node.module is None and (
                (base / f"{alias.name}.py").exists() or (base / f"{alias.name}.pyx").exists()
                or (base / alias.name).is_dir())
            is_core = node.level == 2 and node.module is None and alias.name == "_core"
            if not (is_module or is_core):
                found.append(f"{path.name}:{node.lineno}: {node.module or '.'}.{alias.name}")
    return found


def test_the_checker_sees_a_borrowed_private_name(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from .rpc import _Client\nfrom . import _dispatch\nfrom . import _ndarray\n"
                      "from .. import _core\n")
    assert private_names_imported(source) == ["m.py:1: rpc._Client"]


def test_no_proto_module_imports_another_modules_private_name():
    borrowed = [hit for path in proto_sources() for hit in private_names_imported(path)]
    assert borrowed == [], "private names imported across proto modules:\n" + "\n".join(borrowed)


def test_every_proto_error_class_is_defined_in_proto_errors():
    elsewhere = []
    for path in proto_sources():
        if path.name == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                elsewhere.append(f"{path.name}:{node.lineno}: {node.name}")
    assert elsewhere == [], "error classes outside a0py/proto/errors.py:\n" + "\n".join(elsewhere)


def test_proto_errors_are_the_ones_users_import_from_every_documented_path():
    names = a0py.proto.errors.__all__
    assert set(names) == {"CfgError", "RpcCancelledError", "RpcError", "RpcRemoteError",
                          "RpcServerDiedError", "SchemaError", "SchemaConflictError",
                          "DecodeError", "ExtraNotInstalledError"}
    for name in names:
        error = getattr(a0py.proto.errors, name)
        assert issubclass(error, a0py.A0Error), name
        assert getattr(a0py, name) is error, name
        assert getattr(a0py.proto, name) is error, name
        assert name in a0py.__all__ and name in a0py.proto.__all__, name
    for name in ("RpcCancelledError", "RpcError", "RpcRemoteError", "RpcServerDiedError"):
        assert getattr(a0py.proto.rpc, name) is getattr(a0py.proto.errors, name), name
    assert a0py.proto.cfg.CfgError is a0py.proto.errors.CfgError


def test_rpc_and_prpc_share_the_request_reply_modules():
    from a0py.proto import reqrep_client, reqrep_server

    for server, client in ((a0py.RpcServer, a0py.RpcClient), (a0py.PrpcServer, a0py.PrpcClient)):
        assert issubclass(server, reqrep_server.RequestServer)
        assert issubclass(client, reqrep_client.RequestClient)
    assert issubclass(a0py.RpcRequest, reqrep_server.ServedRequest)
    assert issubclass(a0py.PrpcConnection, reqrep_server.ServedRequest)
    assert a0py.proto.rpc.server_pid is a0py.proto.reqrep_wire.server_pid
