package a0py.spark.jvm;

import java.nio.charset.StandardCharsets;

/** A channel of a file as the partition reader needs it: its rows' topic, kind, schema name and encoding. */
final class RowChannel {
  final byte[] topicBytes;
  final String topic;
  final byte kind; // A0Scan.KIND_*
  final byte[] schemaName; // null: no schema
  final byte[] encoding;
  final int headersId; // a typed channel's headers channel, else -1
  final byte headersFormat; // a headers channel's HeadersMessage format (-1: one a0py does not write)

  RowChannel(String topic, byte kind, String schemaName, String encoding, int headersId) {
    this.topicBytes = topic.getBytes(StandardCharsets.UTF_8);
    this.topic = topic;
    this.kind = kind;
    this.schemaName = schemaName == null ? null : schemaName.getBytes(StandardCharsets.UTF_8);
    this.encoding = encoding.getBytes(StandardCharsets.UTF_8);
    this.headersId = headersId;
    this.headersFormat = kind == A0Scan.KIND_HEADERS ? HeadersMessage.format(encoding) : HeadersMessage.PACKET;
  }
}
