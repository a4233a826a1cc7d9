"""rosbag2 directories: a bag is a directory holding ``metadata.yaml`` (its
top mapping ``rosbag2_bagfile_information``) and the storage files it lists
in ``relative_file_paths``. a0py reads bags stored as MCAP
(``storage_identifier: mcap``), their files in the metadata's order; what it
cannot read (sqlite3 storage, per-file or per-message compression) is a
:class:`RecordingFormatError` naming the directory and the command that
converts it.

The YAML is read with a YAML library when one is installed (PyYAML, or
ruamel.yaml, which ``rosbags`` brings), in its safe mode; otherwise with
:func:`parse_metadata_text`, a small parser of just the fields used here
(top-level scalars and lists of scalars under ``rosbag2_bagfile_information``),
so ``a0py[record]`` needs no YAML package. Both writers of these files,
rosbag2's (yaml-cpp) and rosbags' (ruamel.yaml), write those fields as plain
or quoted scalars and block or flow lists, which is what the small parser
reads; anything else under those keys is an error, never a guess.

Invariant: nothing in ``metadata.yaml`` is trusted. A file name listed there
is reduced to its last path component (as rosbag2's own readers do), so a
bag cannot point outside its directory; the file is read at most
:data:`MAX_METADATA_BYTES`.
"""

from __future__ import annotations

import json
import os
import re

from .errors import RecordingFormatError

METADATA_FILE = "metadata.yaml"
TOP_KEY = "rosbag2_bagfile_information"
MAX_METADATA_BYTES = 16 << 20
# The fields read (the rest of the file, per-topic QoS and counts, is left alone).
FIELDS = ("version", "storage_identifier", "relative_file_paths", "compression_format", "compression_mode",
          "ros_distro")
CONVERT_HINT = ("convert it to an uncompressed MCAP bag first, e.g. `rosbags-convert --src {d} --dst NEW_DIR "
                "--dst-storage mcap` (pip install 'a0py[ros]') or `ros2 bag convert` with `storage_id: mcap`")


def is_bag(directory):
    """True when ``directory`` holds a ``metadata.yaml`` that is rosbag2's (it
    names ``rosbag2_bagfile_information``); another tool's file of that name
    leaves the directory an ordinary one."""
    path = os.path.join(directory, METADATA_FILE)
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(MAX_METADATA_BYTES)
    except OSError:
        return True  # unreadable: bag_files says why
    return TOP_KEY.encode() in head


def read_metadata(directory):
    """The fields of :data:`FIELDS` in ``directory``'s ``metadata.yaml`` (a
    dict; a field the file lacks is absent). Raises
    :class:`RecordingFormatError` naming the file for one that is too large,
    not UTF-8, not YAML, or without ``rosbag2_bagfile_information``."""
    path = os.path.join(directory, METADATA_FILE)
    with open(path, "rb") as f:
        raw = f.read(MAX_METADATA_BYTES + 1)
    if len(raw) > MAX_METADATA_BYTES:
        raise RecordingFormatError(f"{path}: larger than {MAX_METADATA_BYTES} bytes: not a rosbag2 metadata file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecordingFormatError(f"{path}: not UTF-8 ({e}): not a rosbag2 metadata file") from None
    doc = _load_with_library(text, path)
    if doc is None:
        return parse_metadata_text(text, path)
    info = doc.get(TOP_KEY) if isinstance(doc, dict) else None
    if not isinstance(info, dict):
        raise RecordingFormatError(f"{path}: no {TOP_KEY} mapping: not a rosbag2 metadata file")
    return {k: info[k] for k in FIELDS if k in info}


def _load_with_library(text, path):
    """The document parsed by an installed YAML library (safe mode), or None
    when there is none."""
    try:
        import yaml
    except ImportError:
        yaml = None
    if yaml is not None:
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise RecordingFormatError(f"{path}: not YAML ({' '.join(str(e).split())})") from None
    try:
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError
    except ImportError:
        return None
    try:
        return YAML(typ="safe", pure=True).load(text)
    except YAMLError as e:
        raise RecordingFormatError(f"{path}: not YAML ({' '.join(str(e).split())})") from None


_KEY_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*:(?:\s+(.*))?$")


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def _strip_comment(value):
    # A plain scalar ends at " #"; quoted ones are handled before this.
    at = value.find(" #")
    return (value[:at] if at >= 0 else value).strip()


def _scalar(value, path, lineno):
    """A YAML scalar as written by the rosbag2 writers: plain, '...' or "..."."""
    value = value.strip()
    if value.startswith('"'):
        end = _closing_double_quote(value)
        if end < 0 or _strip_comment(value[end + 1:]):
            raise RecordingFormatError(f"{path}: line {lineno}: a double-quoted value that does not end on its line")
        try:
            return json.loads(value[:end + 1])
        except ValueError:
            raise RecordingFormatError(f"{path}: line {lineno}: a double-quoted value this reader cannot "
                                       "unescape (install PyYAML to read it)") from None
    if value.startswith("'"):
        m = re.match(r"'((?:[^']|'')*)'", value)
        if m is None or _strip_comment(value[m.end():]):
            raise RecordingFormatError(f"{path}: line {lineno}: a single-quoted value that does not end on its line")
        return m.group(1).replace("''", "'")
    value = _strip_comment(value)
    if value in ("", "~", "null", "Null", "NULL"):
        return None
    if value[0] in "&*!|>{@`%":
        raise RecordingFormatError(f"{path}: line {lineno}: {value[:20]!r}: YAML this reader does not take "
                                   "(anchors, tags, block scalars, maps; install PyYAML to read it)")
    if re.fullmatch(r"[-+]?\d+", value):
        return int(value)
    return value


def _closing_double_quote(value):
    i = 1
    while i < len(value):
        if value[i] == "\\":
            i += 2
            continue
        if value[i] == '"':
            return i
        i += 1
    return -1


def _flow_list(value, path, lineno):
    inner = _strip_comment(value)
    if not inner.endswith("]"):
        raise RecordingFormatError(f"{path}: line {lineno}: a [list] that does not end on its line")
    inner = inner[1:-1].strip()
    if not inner:
        return []
    return [_scalar(item, path, lineno) for item in inner.split(",")]


def parse_metadata_text(text, path="metadata.yaml"):
    """The fields of :data:`FIELDS` from the text of a rosbag2
    ``metadata.yaml``, without a YAML library: the keys directly under
    ``rosbag2_bagfile_information`` whose values are scalars (plain, quoted,
    or a plain scalar continued on the next lines) or lists of scalars (block
    ``- item`` lines, or ``[a, b]``). Raises :class:`RecordingFormatError`
    naming ``path`` and the line for anything else it meets in those fields."""
    lines = text.splitlines()
    start = None
    for i, line in enumerate(lines):
        if re.fullmatch(rf"{TOP_KEY}:\s*(#.*)?", line.rstrip()):
            start = i + 1
            break
    if start is None:
        raise RecordingFormatError(f"{path}: no {TOP_KEY} mapping: not a rosbag2 metadata file")
    body = []
    for i in range(start, len(lines)):
        line = lines[i].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if _indent(line) == 0:
            break  # the next top-level key
        body.append((i + 1, line))
    if not body:
        return {}
    key_indent = _indent(body[0][1])
    out = {}
    j = 0
    while j < len(body):
        lineno, line = body[j]
        j += 1
        if _indent(line) != key_indent:
            continue  # inside a value this reader does not need
        m = _KEY_RE.match(line.strip())
        if m is None:
            if line.strip().startswith("- "):
                continue  # a list item at the key's indent (allowed by YAML): belongs to the key before
            raise RecordingFormatError(f"{path}: line {lineno}: expected 'key: value' under {TOP_KEY}")
        key, value = m.group(1), m.group(2)
        # The lines of this key's value: deeper, or '- ' items at the key's own indent.
        nested = []
        while j < len(body) and (_indent(body[j][1]) > key_indent
                                 or body[j][1].strip().startswith("- ") or body[j][1].strip() == "-"):
            nested.append(body[j])
            j += 1
        if key not in FIELDS:
            continue
        if value is not None and value.strip() and not value.strip().startswith("#"):
            if value.strip().startswith("["):
                out[key] = _flow_list(value.strip(), path, lineno)
            else:
                out[key] = _scalar(value, path, lineno)
                if nested and isinstance(out[key], str) and not value.strip().startswith(("'", '"')):
                    out[key] = " ".join([out[key], *(_strip_comment(x.strip()) for _, x in nested)])
            continue
        if not nested:
            out[key] = None
        elif all(x.strip().startswith("- ") or x.strip() == "-" for _, x in nested):
            out[key] = [_scalar(x.strip()[1:], path, n) for n, x in nested]
        elif len(nested) >= 1 and not any(_KEY_RE.match(x.strip()) or x.strip().startswith("-") for _, x in nested):
            # A plain or quoted scalar moved to the next line(s) (ruamel.yaml does this for long values).
            first = nested[0][1].strip()
            if first.startswith(("'", '"')):
                out[key] = _scalar(" ".join(x.strip() for _, x in nested), path, nested[0][0])
            else:
                out[key] = " ".join(_strip_comment(x.strip()) for _, x in nested)
        else:
            raise RecordingFormatError(f"{path}: line {lineno}: {key}: a value this reader does not take "
                                       "(install PyYAML to read it)")
    return out


def bag_files(directory):
    """The MCAP files of the rosbag2 bag ``directory``, in the order its
    ``metadata.yaml`` lists them.

    Raises :class:`RecordingFormatError` naming the directory for metadata
    that does not parse or lists no file, a listed file that is missing,
    storage other than MCAP (sqlite3), or compressed files or messages, each
    saying how to convert the bag into one a0py reads."""
    d = os.fspath(directory)
    meta = read_metadata(d)
    storage = meta.get("storage_identifier")
    files = meta.get("relative_file_paths")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) and f for f in files):
        raise RecordingFormatError(f"{d}: its {METADATA_FILE} lists no storage file (relative_file_paths): "
                                   "not a complete rosbag2 bag")
    if storage != "mcap":
        raise RecordingFormatError(
            f"{d}: a rosbag2 bag stored as {storage!r} ({', '.join(os.path.basename(f) for f in files)}); a0py "
            f"reads bags stored as MCAP only: {CONVERT_HINT.format(d=d)}")
    mode = str(meta.get("compression_mode") or "").lower()
    fmt = meta.get("compression_format") or ""
    if mode not in ("", "none"):
        what = "each file" if mode == "file" else "each message" if mode == "message" else f"its {mode}"
        raise RecordingFormatError(
            f"{d}: a rosbag2 bag with {what} compressed ({fmt or 'unknown format'}, compression_mode {mode!r}); "
            f"a0py reads uncompressed bags (MCAP chunk compression is fine): {CONVERT_HINT.format(d=d)}")
    out = []
    missing = []
    for f in files:
        # As rosbag2's readers do: the name only (old bags wrote 'bagdir/name_0.db3').
        p = os.path.join(d, os.path.basename(f.replace("\\", "/")))
        if not os.path.isfile(p):
            missing.append(os.path.basename(p))
        out.append(p)
    if missing:
        raise RecordingFormatError(f"{d}: its {METADATA_FILE} lists {', '.join(missing)}, not in the directory: "
                                   "the bag is incomplete (copy the missing files, or remove them from "
                                   "relative_file_paths)")
    return out
