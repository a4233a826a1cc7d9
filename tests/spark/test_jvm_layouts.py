"""The JVM reader's layouts are the Python ones: McapRecords.java and
PacketLayout.java are what jvm/generate_layouts.py writes from
``a0py.recording.format.RECORD_LAYOUTS`` and ``a0py._core.PACKET_LAYOUT``,
the jar's compiled classes hold the same numbers, and no hand-written Java
source declares the formats' magics or opcodes again."""

import glob
import importlib.util
import os
import re
import shutil
import subprocess
import zipfile

import pytest
from helpers.procs import REPO

from a0py._core import PACKET_LAYOUT, STANDARD_HEADERS
from a0py.recording.format import RECORD_HEADER, RECORD_LAYOUTS, RECORD_LENGTH_AT


def _generator():
    spec = importlib.util.spec_from_file_location("generate_layouts", os.path.join(REPO, "jvm", "generate_layouts.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def _expected_constants():
    """{java class: {constant: value}} as the Python tables give them."""
    out = {"McapRecords": {"RECORD_HEADER": RECORD_HEADER, "RECORD_LENGTH": RECORD_LENGTH_AT}}
    for layout in RECORD_LAYOUTS.values():
        consts = {GEN._java_name(name): at for name, at in layout.fixed_offsets().items()}
        consts.update(OPCODE=layout.opcode, HEAD=layout.head.size)
        for name, _kind in layout.fields:
            try:
                consts[f"{GEN._java_name(name)}_ENTRY"] = layout.entry_size(name)
            except KeyError:
                pass
        out[f"McapRecords${GEN._java_name(layout.name)}"] = consts
    packet = {GEN._java_name(k): v for k, v in PACKET_LAYOUT.items()}
    packet["RESERVED_OFF"] = PACKET_LAYOUT["header_count_off"] + 4
    out["PacketLayout"] = packet
    return out


@pytest.mark.parametrize("path", sorted(GEN.generated()), ids=os.path.basename)
def test_the_committed_java_layout_is_what_the_generator_writes_from_the_python_table(path):
    with open(path, encoding="utf-8") as f:
        committed = f.read()
    assert committed == GEN.generated()[path], (
        f"{os.path.relpath(path, REPO)} is stale against its Python table: run `make jvm` "
        "(python jvm/generate_layouts.py) and commit it")


def _source_constants(text, top):
    """{class: {constant: int value}} declared in a generated Java source
    (``top``: its class; nested classes as ``top$Nested``)."""
    out = {top: {}}
    current = out[top]
    for line in text.splitlines():
        m = re.match(r"^  static final class (\w+) \{$", line)
        if m:
            current = out.setdefault(f"{top}${m.group(1)}", {})
        elif line == "  }":
            current = out[top]
        for name, value in re.findall(r"\b([A-Z][A-Z0-9_]*) = (0x[0-9a-f]+|-?\d+)[,;]", line):
            current[name] = int(value, 0)
    return out


def test_the_generated_sources_hold_every_record_field_and_packet_offset_of_the_python_tables():
    want = _expected_constants()
    got = _source_constants(GEN.mcap_records_source(), "McapRecords")
    got.update(_source_constants(GEN.packet_layout_source(), "PacketLayout"))
    assert got == want
    assert got["McapRecords$Message"]["CHANNEL_ID"] == 9 and got["McapRecords$Message"]["PUBLISH_TIME"] == 23
    assert ", ".join(f'"{h}"' for h in STANDARD_HEADERS) in GEN.packet_layout_source()


def test_the_check_mode_names_a_stale_file_and_fails(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "McapRecords.java"
    stale.write_text("// an old table\n")
    fresh = tmp_path / "PacketLayout.java"
    fresh.write_text(GEN.packet_layout_source())
    monkeypatch.setattr(GEN, "generated", lambda: {str(stale): GEN.mcap_records_source(),
                                                   str(fresh): GEN.packet_layout_source()})
    assert GEN.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "McapRecords.java is stale" in out and "PacketLayout.java" not in out
    assert stale.read_text() == "// an old table\n"  # --check writes nothing
    assert GEN.main([]) == 0
    assert stale.read_text() == GEN.mcap_records_source()
    assert GEN.main(["--check"]) == 0


def _javap_constants(jar, classes):
    """{class: {constant: int value}} of the compiled classes in ``jar``."""
    r = subprocess.run(["javap", "-constants", "-cp", jar, *(f"a0py.spark.jvm.{c}" for c in classes)],
                       capture_output=True, text=True, check=True, timeout=120)
    out = {}
    current = None
    for line in r.stdout.splitlines():
        m = re.match(r"^final class a0py\.spark\.jvm\.(\S+) ", line)
        if m:
            current = out.setdefault(m.group(1), {})
            continue
        m = re.match(r"^\s+static final int (\w+) = (-?\d+);$", line)
        if m and current is not None:
            current[m.group(1)] = int(m.group(2))
    return out


def test_the_jars_compiled_layouts_hold_the_python_tables_numbers():
    jar = os.path.join(REPO, "a0py", "spark", "jars", "a0py-spark.jar")
    if not os.path.exists(jar) or not shutil.which("javap"):
        pytest.skip("the JVM reader's jar is not built here (make jvm), or no javap")
    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
    want = _expected_constants()
    missing = [c for c in want if f"a0py/spark/jvm/{c}.class" not in names]
    assert not missing, f"the jar lacks {missing}: rebuild it with `make jvm`"
    got = _javap_constants(jar, list(want))
    for cls, consts in want.items():
        assert got.get(cls) == consts, f"{cls} in the jar differs from the Python table: rebuild it with `make jvm`"


def test_no_hand_written_java_source_declares_a_magic_or_an_opcode_again():
    generated = set(GEN.generated())
    found = []
    patterns = [
        re.compile(r"0x4B503041", re.IGNORECASE),  # the packet magic
        re.compile(r"'M',\s*'C',\s*'A',\s*'P'"),  # the MCAP magic
        re.compile(r"static final int OP_\w+\s*="),  # an opcode
        re.compile(r"\bINDEX_OFF\s*=\s*\d"),  # the packet's header index
    ]
    for path in sorted(glob.glob(os.path.join(REPO, "jvm", "src", "**", "*.java"), recursive=True)):
        if path in generated:
            continue
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if any(p.search(line) for p in patterns):
                    found.append(f"{os.path.relpath(path, REPO)}:{n}: {line.strip()}")
    assert not found, "layout constants typed by hand (take them from McapRecords / PacketLayout):\n" + "\n".join(found)
