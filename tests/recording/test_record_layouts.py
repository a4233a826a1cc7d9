"""recording/format.py's table of MCAP record layouts (RECORD_LAYOUTS): its
field names are the specification's (the ``mcap`` package's record classes
use the same), and each layout's head reads the fields back from the bytes
the ``mcap`` package writes."""

import dataclasses

import pytest
from mcap import records as mcap_records
from mcap.data_stream import RecordBuilder

from a0py.recording.format import (
    FOOTER_BODY,
    FOOTER_RECORD,
    MESSAGE_FIXED,
    MESSAGE_INDEX_ENTRY,
    MESSAGE_INDEX_FIXED,
    RECORD_HEAD,
    RECORD_HEADER,
    RECORD_LAYOUTS,
    RECORD_LENGTH_AT,
    RecordLayout,
)

# Where the mcap package's class names a field otherwise: the chunk's
# records are its `data`; an attachment's crc is computed when it is written.
_PACKAGE_NAMES = {("Chunk", "records"): "data", ("Attachment", "crc"): None}


def _written(record):
    rb = RecordBuilder()
    record.write(rb)
    return rb.end()


# One record of each type, and the values its layout's head must read back
# (opcode and body length first, checked in the test).
SAMPLES = {
    "Header": (mcap_records.Header(profile="p", library="lib"), (1,)),
    "Footer": (mcap_records.Footer(summary_start=11, summary_offset_start=22, summary_crc=33), (11, 22, 33)),
    "Schema": (mcap_records.Schema(id=3, name="name", encoding="e", data=b"d"), (3, 4)),
    "Channel": (mcap_records.Channel(id=4, schema_id=5, topic="topic", message_encoding="m", metadata={}),
                (4, 5, 5)),
    "Message": (mcap_records.Message(channel_id=7, sequence=8, log_time=9, publish_time=10, data=b"xy"),
                (7, 8, 9, 10)),
    "Chunk": (mcap_records.Chunk(message_start_time=1, message_end_time=2, uncompressed_size=3,
                                 uncompressed_crc=4, compression="zstd", data=b"abc"), (1, 2, 3, 4, 4)),
    "Message Index": (mcap_records.MessageIndex(channel_id=5, records=[(1, 2), (3, 4)]), (5, 32)),
    "Chunk Index": (mcap_records.ChunkIndex(
        message_start_time=1, message_end_time=2, chunk_start_offset=3, chunk_length=4,
        message_index_offsets={1: 2, 3: 4}, message_index_length=5, compression="", compressed_size=6,
        uncompressed_size=7), (1, 2, 3, 4, 20)),
    "Attachment": (mcap_records.Attachment(log_time=1, create_time=2, name="n", media_type="t", data=b""),
                   (1, 2, 1)),
    "Attachment Index": (mcap_records.AttachmentIndex(
        offset=1, length=2, log_time=3, create_time=4, data_size=5, name="nm", media_type="t"),
        (1, 2, 3, 4, 5, 2)),
    "Statistics": (mcap_records.Statistics(
        message_count=1, schema_count=2, channel_count=3, attachment_count=4, metadata_count=5, chunk_count=6,
        message_start_time=7, message_end_time=8, channel_message_counts={1: 9}), (1, 2, 3, 4, 5, 6, 7, 8, 10)),
    "Metadata": (mcap_records.Metadata(name="nm", metadata={"k": "v"}), (2,)),
    "Metadata Index": (mcap_records.MetadataIndex(offset=1, length=2, name="x"), (1, 2, 1)),
    "Summary Offset": (mcap_records.SummaryOffset(group_opcode=3, group_start=4, group_length=5), (3, 4, 5)),
    "Data End": (mcap_records.DataEnd(data_section_crc=9), (9,)),
}


def test_the_table_has_every_record_of_the_specification_once():
    assert sorted(RECORD_LAYOUTS) == sorted(SAMPLES)
    assert len({r.opcode for r in RECORD_LAYOUTS.values()}) == len(RECORD_LAYOUTS)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_layouts_fields_are_named_as_the_specification_and_the_mcap_package_name_them(name):
    layout = RECORD_LAYOUTS[name]
    record, _ = SAMPLES[name]
    ours = {_PACKAGE_NAMES.get((name, f), f) for f, _kind in layout.fields} - {None}
    assert ours == {f.name for f in dataclasses.fields(record)}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_layouts_head_reads_back_the_fields_the_mcap_package_writes(name):
    layout = RECORD_LAYOUTS[name]
    record, fields = SAMPLES[name]
    data = _written(record)
    opcode, length, *rest = layout.head.unpack_from(data, 0)
    assert (opcode, length) == (layout.opcode, len(data) - RECORD_HEADER)
    assert RECORD_HEAD.unpack_from(data, 0) == (opcode, length)
    assert int.from_bytes(data[RECORD_LENGTH_AT:RECORD_LENGTH_AT + 8], "little") == length
    assert tuple(rest) == fields
    for field, at in layout.fixed_offsets().items():
        assert layout.body_offset(field) == at - RECORD_HEADER


def test_the_named_offsets_are_the_tables():
    footer = RECORD_LAYOUTS["Footer"]
    assert FOOTER_RECORD == footer.head.size == len(_written(SAMPLES["Footer"][0])) == 29
    assert FOOTER_BODY == 20
    message = RECORD_LAYOUTS["Message"]
    assert MESSAGE_FIXED == message.offset("data") == message.head.size == 31
    assert (message.offset("channel_id"), message.offset("sequence"), message.offset("log_time"),
            message.offset("publish_time")) == (9, 11, 15, 23)
    assert MESSAGE_INDEX_FIXED == 15 and MESSAGE_INDEX_ENTRY == 16
    assert RECORD_LAYOUTS["Chunk"].length_prefix("records").format == "<Q"
    assert RECORD_LAYOUTS["Chunk Index"].entry_size("message_index_offsets") == 10


def test_a_field_without_a_fixed_offset_or_entries_is_a_key_error_and_an_unknown_type_a_value_error():
    chunk = RECORD_LAYOUTS["Chunk"]
    with pytest.raises(KeyError, match="Chunk record: no fixed offset for field 'records'"):
        chunk.offset("records")
    with pytest.raises(KeyError, match="no fixed offset for field 'nope'"):
        chunk.offset("nope")
    with pytest.raises(KeyError, match="field 'compression' has no fixed-size entries"):
        chunk.entry_size("compression")
    with pytest.raises(KeyError, match="field 'uncompressed_size' is not length-prefixed"):
        chunk.length_prefix("uncompressed_size")
    with pytest.raises(ValueError, match="Bad record, field 'x': type 'Float' is not one of the specification's"):
        RecordLayout("Bad", 0x99, [("x", "Float")])
